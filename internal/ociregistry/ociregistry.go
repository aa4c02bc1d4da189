// Package ociregistry runs the CNCF distribution registry (hack/build-registry.sh) on a
// loopback address: the local OCI registry that `import --image` pushes bundle images
// to and that the local cluster (`make dev`, test/e2e) pulls image volumes from.
package ociregistry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// Config says where the registry listens and keeps its blobs.
type Config struct {
	// Addr is host:port to listen on, e.g. "127.0.0.1:5001"; port 0 picks a free one.
	Addr string
	// Dir holds the registry's config file and log (registry.yml, registry.log).
	Dir string
	// DataDir holds the pushed images; default Dir/data. Keep it to keep them.
	DataDir string
}

// Registry is a running registry. Stop it with Stop.
type Registry struct {
	// Host is "localhost:PORT", the registry part of image references pushed here;
	// go-containerregistry and containerd reach localhost over plain HTTP.
	Host string
	cmd  *exec.Cmd
}

// Start builds the registry once, starts it and returns when it answers /v2/.
func Start(ctx context.Context, cfg Config) (*Registry, error) {
	bin, err := toolchain.Registry()
	if err != nil {
		return nil, err
	}
	addr, err := resolveAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(cfg.Dir, "data")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(cfg.Dir, "registry.yml")
	if err := os.WriteFile(conf, []byte(configYAML(addr, cfg.DataDir)), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(cfg.Dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ociregistry: start %s: %w", bin, err)
	}
	_, port, _ := net.SplitHostPort(addr)
	r := &Registry{Host: "localhost:" + port, cmd: cmd}
	if err := r.wait(ctx, addr); err != nil {
		r.Stop()
		return nil, fmt.Errorf("ociregistry: registry on %s: %w (log in %s)", addr, err, cfg.Dir)
	}
	return r, nil
}

// configYAML is the registry's configuration: filesystem storage, deletes allowed (so
// `crane delete` and garbage collection work), listening on addr only.
func configYAML(addr, data string) string {
	return "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: " +
		strconv.Quote(data) + "\n  delete:\n    enabled: true\nhttp:\n  addr: " + strconv.Quote(addr) + "\n"
}

func resolveAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("ociregistry: address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (r *Registry) wait(ctx context.Context, addr string) error {
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		case <-deadline:
			return fmt.Errorf("no answer on /v2/ within 30s (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pid is the registry's process id (its own process group).
func (r *Registry) Pid() int { return r.cmd.Process.Pid }

// Stop ends the registry process.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
}
