package localrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/loopback"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// WriteFiles writes files under dir (creating directories), e.g. render.Output.Files and
// render.Output.External, to lay out what a pod sees under /etc/workerd.
func WriteFiles(dir string, files ...[]render.File) error {
	for _, fs := range files {
		for _, f := range fs {
			p := filepath.Join(dir, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// LocalOptions configure StartLocal.
type LocalOptions struct {
	// Binary is the workerd binary (the pinned one: testenv.Workerd, hack/install-workerd.sh).
	Binary string
	// Dir holds config.capnp and the files it embeds (WriteFiles).
	Dir string
	// Sockets to bind on 127.0.0.1 port 0; default http, health, trigger.
	Sockets []string
	// Externals maps external service names to "host:port" (--external-addr). The
	// sidecar defaults to a loopback port nothing listens on, so /readyz fails clearly.
	Externals map[string]string
	// SidecarAliases are external services that take the sidecar's address unless
	// Externals has them (render.SidecarAliases of a rendered Worker).
	SidecarAliases []string
	// Env is added to the process environment, e.g. "WORKERD_SECRET_TOKEN=s3cret".
	Env []string
	// Args are more workerd flags, e.g. --directory-path for a shard's storage.
	Args []string
	// Output, if set, receives workerd's stdout and stderr as they come.
	Output io.Writer
}

// Local is a workerd process started by StartLocal.
type Local struct {
	// Addrs maps socket name to its "127.0.0.1:port", from workerd's listen events.
	Addrs map[string]string
	cmd   *exec.Cmd
	out   *SyncBuffer
	done  chan struct{}
	err   error
}

// StartupError is workerd failing to start: Messages are workerd's own error lines
// (e.g. "service hello: Uncaught SyntaxError: Unexpected end of input"), Output all
// it printed.
type StartupError struct {
	ExitErr  error
	Messages []string
	Output   string
}

func (e *StartupError) Error() string {
	msg := strings.Join(e.Messages, "\n")
	if msg == "" {
		msg = strings.TrimSpace(e.Output)
	}
	return fmt.Sprintf("workerd failed to start (%v):\n%s", e.ExitErr, msg)
}

// SyncBuffer collects a process's output while others may read it (String); w, when
// set, gets a copy of every write.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   io.Writer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		_, _ = b.w.Write(p)
	}
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeLoopbackAddr returns a loopback address and port that were free a moment ago
// (loopback.FreeAddr: a random address in 127.128.0.0/9, so that no other process's
// 127.0.0.1 port can take it before the caller binds it).
func FreeLoopbackAddr() (string, error) { return loopback.FreeAddr() }

// StartLocal runs `workerd serve --experimental <Dir>/config.capnp` with every socket
// on 127.0.0.1 port 0 and --control-fd, and returns once workerd has reported a listen
// event for each socket. If workerd exits first, the error is a *StartupError holding
// its messages. Stop the process with Stop (or cancel ctx).
func StartLocal(ctx context.Context, o LocalOptions) (*Local, error) {
	args, sockets, err := localArgs(o)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.Binary, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	out := &SyncBuffer{w: o.Output}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", o.Binary, err)
	}
	w.Close()
	l := &Local{Addrs: map[string]string{}, cmd: cmd, out: out, done: make(chan struct{})}
	ready := make(chan struct{})
	go l.watchListens(r, sockets, ready)
	go func() {
		l.err = cmd.Wait()
		close(l.done)
	}()
	select {
	case <-ready:
		return l, nil
	case <-l.done:
		return nil, &StartupError{ExitErr: l.err, Messages: ErrorMessages(out.String()), Output: out.String()}
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-l.done
		return nil, ctx.Err()
	}
}

// LocalOptions are the options that run r from dir (where WriteFiles put its files)
// as its pods would: a shard also gets the gateway socket, storage under dir and its
// pod name; an engine the workflows socket. Binary and Env are left to the caller.
func (r Rendered) LocalOptions(dir string) (LocalOptions, error) {
	o := LocalOptions{Dir: dir, Sockets: []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket}}
	if r.Worker != nil {
		o.SidecarAliases = render.SidecarAliases(r.Worker)
	}
	switch r.HostKind {
	case v1alpha1.ReferenceDurableObjectNamespace:
		st := filepath.Join(dir, render.DOStorageService)
		if err := os.MkdirAll(st, 0o755); err != nil {
			return o, err
		}
		o.Sockets = append(o.Sockets, podcontract.GatewaySocket)
		o.Args = []string{fmt.Sprintf("--directory-path=%s=%s", render.DOStorageService, st)}
		o.Env = []string{render.PodNameEnv + "=" + r.PodSet() + "-0"}
	case v1alpha1.ReferenceWorkflow:
		o.Sockets = append(o.Sockets, podcontract.WorkflowSocket)
	case v1alpha1.ReferenceKVNamespace, v1alpha1.ReferenceD1Database, v1alpha1.ReferenceQueue:
		// A data store's host (docs/kv.md): the gateway and its storage directories.
		o.Sockets = append(o.Sockets, podcontract.GatewaySocket)
		dirs := []string{render.DOStorageService}
		if r.HostKind == v1alpha1.ReferenceKVNamespace {
			dirs = append(dirs, render.DataBlobsService)
		}
		for _, svc := range dirs {
			st := filepath.Join(dir, svc)
			if err := os.MkdirAll(st, 0o755); err != nil {
				return o, err
			}
			o.Args = append(o.Args, fmt.Sprintf("--directory-path=%s=%s", svc, st))
		}
	}
	return o, nil
}

// localArgs are workerd's args for o and the number of sockets it will report.
func localArgs(o LocalOptions) ([]string, int, error) {
	sockets := o.Sockets
	if len(sockets) == 0 {
		sockets = []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket}
	}
	externals := map[string]string{}
	for k, v := range o.Externals {
		externals[k] = v
	}
	if _, ok := externals[podcontract.SidecarService]; !ok {
		a, err := FreeLoopbackAddr()
		if err != nil {
			return nil, 0, err
		}
		externals[podcontract.SidecarService] = a
	}
	for _, s := range o.SidecarAliases {
		if _, ok := externals[s]; !ok {
			externals[s] = externals[podcontract.SidecarService]
		}
	}
	args := []string{"serve", "--experimental", filepath.Join(o.Dir, podcontract.ConfigFile), "--control-fd=3"}
	for _, s := range sockets {
		args = append(args, fmt.Sprintf("--socket-addr=%s=127.0.0.1:0", s))
	}
	for k, v := range externals {
		args = append(args, fmt.Sprintf("--external-addr=%s=%s", k, v))
	}
	return append(args, o.Args...), len(sockets), nil
}

// watchListens reads workerd's control events from r into l.Addrs and closes ready
// once sockets sockets listen.
func (l *Local) watchListens(r *os.File, sockets int, ready chan<- struct{}) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		var ev struct {
			Event  string `json:"event"`
			Socket string `json:"socket"`
			Port   int    `json:"port"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "listen" {
			continue
		}
		l.Addrs[ev.Socket] = fmt.Sprintf("127.0.0.1:%d", ev.Port)
		if !signalled && len(l.Addrs) >= sockets {
			signalled = true
			close(ready)
		}
	}
}

// Output returns what workerd printed so far (stdout and stderr).
func (l *Local) Output() string { return l.out.String() }

// Stop kills workerd and waits for it to exit.
func (l *Local) Stop() {
	select {
	case <-l.done:
		return
	default:
	}
	_ = l.cmd.Process.Kill()
	<-l.done
}

// ErrorMessages extracts workerd's error messages from its output: the "message" of
// structured (JSON) lines at level error or fatal, and plain lines that are neither
// JSON nor indented continuation lines are kept as is, with their continuation lines.
func ErrorMessages(output string) []string {
	var msgs []string
	for _, line := range strings.Split(output, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "{") {
			var ev struct {
				Level   string `json:"level"`
				Message string `json:"message"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil {
				if ev.Level == "error" || ev.Level == "fatal" {
					msgs = append(msgs, ev.Message)
				}
				continue
			}
		}
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(msgs) > 0 {
			msgs[len(msgs)-1] += "\n" + line
			continue
		}
		msgs = append(msgs, line)
	}
	return msgs
}
