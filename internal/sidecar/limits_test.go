package sidecar_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func serve(t *testing.T, o sidecar.Options) string {
	t.Helper()
	o.Addr, o.DataDir = testenv.FreeLoopbackAddr(t), t.TempDir()
	srv, err := sidecar.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

// A client that declares a body and never sends it is cut off after BodyTimeout, not
// held forever.
func TestSlowBodyCut(t *testing.T) {
	addr := serve(t, sidecar.Options{BodyTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("POST /channels/v1/objects/ns/o/subscribe HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"))
	// The client's own deadline only keeps a failing test from hanging: the server must
	// answer or close first.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a body that never came held the connection until the client gave up: %v", err)
	}
}

// Past MaxConns open connections the next one waits until one closes.
func TestConnectionLimit(t *testing.T) {
	const maxConns = 4
	addr := serve(t, sidecar.Options{MaxConns: maxConns})
	var held []net.Conn
	for range maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		held = append(held, c) // kept alive, idle
	}
	got := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("connection %d served at once (%v), want it held until one closes", maxConns+1, err)
	case <-time.After(500 * time.Millisecond):
	}
	held[0].Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not served after another closed")
	}
}

// A channels pipeline (a request body carrying many publishes) has BodyTimeout per line:
// lines spaced below it keep it open past BodyTimeout in all; silence longer ends it.
func TestPipelineBodyTimeoutPerLine(t *testing.T) {
	addr := serve(t, sidecar.Options{BodyTimeout: time.Second})
	pr, pw := io.Pipe()
	defer pw.Close()
	res, err := http.Post("http://"+addr+"/channels/v1/objects/ns/o/pipeline", "application/x-ndjson", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	answers := bufio.NewScanner(res.Body)
	for i := range 4 { // 4 × 400 ms: longer than BodyTimeout in all
		if _, err := io.WriteString(pw, `{"channel":"c","message":"m"}`+"\n"); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !answers.Scan() || answers.Text() != `{"reached":0}` {
			t.Fatalf("answer %d: %q, %v; want reached 0", i+1, answers.Text(), answers.Err())
		}
		time.Sleep(400 * time.Millisecond)
	}
	done := make(chan bool, 1)
	go func() { done <- answers.Scan() }()
	select {
	case more := <-done:
		if more {
			t.Fatalf("an answer without a line: %q", answers.Text())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent pipeline was not ended after BodyTimeout")
	}
}
