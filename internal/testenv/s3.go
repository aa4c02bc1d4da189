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
	proc   *s3Proc
}

// s3Proc is the running server process and how to start it again.
type s3Proc struct {
	args []string
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

func (p *s3Proc) start(t testing.TB, bin string) {
	t.Helper()
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// Kill kills the server with SIGKILL; Restart starts it again on the same address
// and directories (its objects survive, as a real store's would).
func (s S3) Kill() {
	_ = s.proc.cmd.Process.Kill()
	_ = s.proc.cmd.Wait()
}

// Restart starts the server killed by Kill again and waits until it listens.
func (s S3) Restart(t testing.TB) {
	t.Helper()
	bin, err := toolchain.S3Server()
	if err != nil {
		t.Fatal(err)
	}
	s.proc.start(t, bin)
	u, _ := url.Parse(s.Endpoint)
	waitListening(t, u.Host)
}

// StartS3 starts an S3-compatible server for the test with buckets created, and stops
// it when the test ends.
func StartS3(t testing.TB, buckets ...string) S3 {
	t.Helper()
	return StartS3On(t, FreeLoopbackAddr(t), buckets...)
}

// StartS3On is StartS3 listening on addr (host:port).
func StartS3On(t testing.TB, addr string, buckets ...string) S3 {
	t.Helper()
	bin, err := toolchain.S3Server()
	if err != nil {
		t.Fatal(err)
	}
	s := S3{Endpoint: "http://" + addr, AccessKeyID: "r2-test-access", SecretAccessKey: "r2-test-secret-0123456789"}
	// --sidecar keeps the object metadata in files: xattrs of the test's filesystem
	// may be missing or too small.
	s.proc = &s3Proc{logs: &bytes.Buffer{}, args: []string{"--port", addr, "--access", s.AccessKeyID, "--secret", s.SecretAccessKey, "--quiet",
		"posix", "--sidecar", t.TempDir(), t.TempDir()}}
	s.proc.start(t, bin)
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", s.proc.logs.String())
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
			t.Fatalf("versitygw: create bucket %q: %v\n%s", b, err, s.proc.logs.String())
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
