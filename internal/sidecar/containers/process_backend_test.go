package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// processBackend runs each instance as a local process of one binary, standing in for
// the image whose CMD is "/server" (Cmd replaces CMD, as in Docker). The process
// shares this machine's network, so its host is 127.0.0.1 and one instance at a time
// can bind its port.
type processBackend struct {
	bin       string
	readyPort string // Start returns once something accepts on 127.0.0.1:readyPort

	mu      sync.Mutex
	procs   map[string]*process
	started []Instance
}

type process struct {
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{}
	code int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (pb *processBackend) Start(ctx context.Context, inst Instance) (string, error) {
	if len(inst.Args) == 0 || inst.Args[0] != "/server" {
		return "", fmt.Errorf("exec %q: no such file in the image", inst.Args)
	}
	p := &process{cmd: exec.Command(pb.bin, inst.Args[1:]...), done: make(chan struct{})}
	p.cmd.Env = inst.Env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		return "", err
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		close(p.done)
	}()
	pb.mu.Lock()
	pb.procs[inst.Name] = p
	pb.started = append(pb.started, inst)
	pb.mu.Unlock()
	for {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+pb.readyPort, time.Second); err == nil {
			c.Close()
			return "127.0.0.1", nil
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("exited with code %d: %s", p.code, p.out.String())
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (pb *processBackend) get(name string) *process {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.procs[name]
}

func (pb *processBackend) Wait(ctx context.Context, name string) (int, error) {
	p := pb.get(name)
	if p == nil {
		return 0, fmt.Errorf("no instance %s", name)
	}
	select {
	case <-p.done:
		return p.code, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (pb *processBackend) Stop(ctx context.Context, name string, grace time.Duration) error {
	p := pb.get(name)
	if p == nil {
		return fmt.Errorf("no instance %s", name)
	}
	if grace == 0 {
		return p.cmd.Process.Kill()
	}
	time.AfterFunc(grace, func() { _ = p.cmd.Process.Kill() })
	return p.cmd.Process.Signal(syscall.SIGTERM)
}

func (pb *processBackend) Remove(ctx context.Context, name string) error {
	p := pb.get(name)
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	pb.mu.Lock()
	delete(pb.procs, name)
	pb.mu.Unlock()
	return nil
}

// running is how many instances have not exited.
func (pb *processBackend) running() int {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	n := 0
	for _, p := range pb.procs {
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}

func (pb *processBackend) killAll() {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	for _, p := range pb.procs {
		_ = p.cmd.Process.Kill()
	}
}
