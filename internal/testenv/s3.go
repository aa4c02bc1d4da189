package testenv

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os/exec"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// S3 is a running S3-compatible server: versitygw (hack/install-s3.sh) over a
// temporary directory, started by StartS3.
type S3 struct {
	// Endpoint is its URL, "http://127.x.y.z:port".
	Endpoint                     string
	AccessKeyID, SecretAccessKey string
	// Client is an S3 client of the server with those credentials.
	Client *minio.Client
}

// StartS3 starts an S3-compatible server for the test with buckets created, and stops
// it when the test ends.
func StartS3(t testing.TB, buckets ...string) S3 {
	t.Helper()
	bin, err := toolchain.S3Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := FreeLoopbackAddr(t)
	s := S3{Endpoint: "http://" + addr, AccessKeyID: "r2-test-access", SecretAccessKey: "r2-test-secret-0123456789"}
	var logs bytes.Buffer
	// --sidecar keeps the object metadata in files: xattrs of the test's filesystem
	// may be missing or too small.
	cmd := exec.Command(bin, "--port", addr, "--access", s.AccessKeyID, "--secret", s.SecretAccessKey, "--quiet",
		"posix", "--sidecar", t.TempDir(), t.TempDir())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", logs.String())
		}
	})
	waitListening(t, addr)
	u, _ := url.Parse(s.Endpoint)
	s.Client, err = minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKeyID, s.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		if err := s.Client.MakeBucket(context.Background(), b, minio.MakeBucketOptions{}); err != nil {
			t.Fatalf("versitygw: create bucket %q: %v\n%s", b, err, logs.String())
		}
	}
	return s
}

// waitListening waits until addr accepts connections (a minute at most).
func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
