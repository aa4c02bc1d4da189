package devcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"os"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// openLog returns a container log file as a stream: the last Tail lines, at most
// LimitBytes, and with Follow, new output until the container stops or ctx ends.
// (Log lines carry no timestamps, so SinceSeconds/SinceTime/Timestamps are ignored.)
func openLog(ctx context.Context, file string, opts api.ContainerLogOpts, running func() bool) (io.ReadCloser, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	offset := int64(len(b))
	if opts.Tail > 0 {
		lines := bytes.SplitAfter(b, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > opts.Tail {
			lines = lines[len(lines)-opts.Tail:]
		}
		b = bytes.Join(lines, nil)
	}
	if opts.LimitBytes > 0 && len(b) > opts.LimitBytes {
		b = b[:opts.LimitBytes]
	}
	if !opts.Follow {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		if _, err := pw.Write(b); err != nil {
			return
		}
		f, err := os.Open(file)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		buf := make([]byte, 32*1024)
		for {
			n, _ := f.Read(buf)
			if n > 0 {
				if _, err := pw.Write(buf[:n]); err != nil {
					return
				}
				continue
			}
			if !running() || ctx.Err() != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return pr, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// kubeconfigVolume is the internal volume key of the pod's generated kubeconfig.
const kubeconfigVolume = "\x00kubeconfig"
