package r2_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/minio/minio-go/v7"
)

// BenchmarkR2Throughput: put and get of an 8 MiB object through a Worker's R2 binding
// (workerd -> the sidecar's gateway -> versitygw) against the same through an S3
// client straight to versitygw, in the same run (docs/benchmarks.md).
func BenchmarkR2Throughput(b *testing.B) {
	h := newHarness(b)
	const size = 8 << 20
	body := pattern(size)
	ctx := context.Background()
	run := func(name string, f func(i int) error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				if err := f(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("put/binding", func(i int) error {
		return expect200(http.NewRequest(http.MethodPut, fmt.Sprintf("%s/stream/bench-%d", h.base, i%4), bytes.NewReader(body)))
	})
	run("put/s3", func(i int) error {
		_, err := h.s3.Client.PutObject(ctx, bucketName, fmt.Sprintf("direct-%d", i%4), bytes.NewReader(body), size, minio.PutObjectOptions{})
		return err
	})
	run("get/binding", func(i int) error {
		return expect200(http.NewRequest(http.MethodGet, fmt.Sprintf("%s/stream/bench-%d", h.base, i%4), nil))
	})
	run("get/s3", func(i int) error {
		o, err := h.s3.Client.GetObject(ctx, bucketName, fmt.Sprintf("direct-%d", i%4), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		n, err := io.Copy(io.Discard, o)
		if err == nil && n != size {
			err = fmt.Errorf("read %d bytes", n)
		}
		return err
	})
}

// expect200 sends req and reads the whole answer, which must be 200.
func expect200(req *http.Request, err error) error {
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", req.Method, req.URL, res.Status)
	}
	return nil
}
