package devcluster

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// exhaustedListener fails its first fails Accepts with EMFILE, as a listener does
// while the process is out of file descriptors, then accepts for real.
type exhaustedListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptLoopOutlivesEMFILE: after a burst of EMFILE the Service's listener
// serves again, and it stops only when closed.
func TestAcceptLoopOutlivesEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	el := &exhaustedListener{Listener: ln}
	el.fails.Store(5)
	var retries atomic.Int32
	served := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		acceptLoop(el, func(c net.Conn) { c.Close(); served <- struct{}{} }, func(error, time.Duration) { retries.Add(1) })
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection served after the EMFILE burst")
	}
	if got := retries.Load(); got != 5 {
		t.Errorf("%d retries, want 5 (one per EMFILE)", got)
	}
	ln.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("accept loop still running after its listener was closed")
	}
}
