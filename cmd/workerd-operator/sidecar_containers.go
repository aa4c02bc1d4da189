package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"

	"github.com/workerd-operator/workerd-operator/internal/containers"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	sidecarcontainers "github.com/workerd-operator/workerd-operator/internal/sidecar/containers"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// sidecarContainersFlags are the sidecar's container engine flags (specs.applyContainerEngine).
type sidecarContainersFlags struct {
	socket, api, dons, image string
}

func (f *sidecarContainersFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.socket, specs.ContainersSocketFlag[2:], "", "serve Docker's API for workerd's containerEngine on this unix socket (shards of a class that runs containers; docs/containers.md)")
	fl.StringVar(&f.api, specs.ContainersAPIFlag[2:], "", "the manager's container API, which runs each instance as a Pod (https://"+podcontract.ContainersAPIService+".<ns>.svc.<domain>:9446)")
	fl.StringVar(&f.dons, specs.ContainersNamespaceFlag[2:], "", "the DurableObjectNamespace whose objects run the containers")
	fl.StringVar(&f.image, specs.ContainersImageFlag[2:], "", "the only image an instance may run (spec.container.image)")
}

// serveContainers serves the container engine until ctx ends, when --containers-socket
// is set. The manager's API is called with the pod's internal certificate and trusted
// by the manager's CA (--tls-dir); the shard pod is $POD_NAME.
func serveContainers(ctx context.Context, f sidecarContainersFlags, tlsDir string, stderr io.Writer) (func(), error) {
	if f.socket == "" {
		return func() {}, nil
	}
	pod := os.Getenv(render.PodNameEnv)
	if f.api == "" || f.dons == "" || pod == "" {
		return nil, fmt.Errorf("sidecar: --containers-socket needs --containers-api, --containers-durable-object-namespace and $%s (docs/containers.md)", render.PodNameEnv)
	}
	cfg, err := managerClientTLS(tlsDir)
	if err != nil {
		return nil, fmt.Errorf("sidecar: containers: %w", err)
	}
	b := managerBackend{c: containers.NewClient(f.api, cfg), dons: f.dons, pod: pod}
	logf := func(prefix, args string) { fmt.Fprintln(stderr, "sidecar: containers:", prefix, args) }
	srv := sidecarcontainers.New(b, sidecarcontainers.Options{Image: f.image, Log: funcr.New(logf, funcr.Options{})})
	l, err := sidecarcontainers.ListenUnix(f.socket)
	if err != nil {
		return nil, fmt.Errorf("sidecar: containers: %w", err)
	}
	go func() { _ = srv.Serve(l) }()
	fmt.Fprintf(stderr, "sidecar: container engine on %s for DurableObjectNamespace %s, instances through %s\n", f.socket, f.dons, f.api)
	return func() { _ = srv.Close() }, nil
}

// managerClientTLS presents the pod's internal certificate and trusts the manager's CA.
func managerClientTLS(dir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, podcontract.InternalTLSCert), filepath.Join(dir, podcontract.InternalTLSKey))
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, podcontract.InternalTLSManagerCA))
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	pool, err := internalca.Pool(ca)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// managerBackend runs the sidecar's instances through the manager's container API.
type managerBackend struct {
	c         *containers.Client
	dons, pod string
}

func (b managerBackend) Start(ctx context.Context, in sidecarcontainers.Instance) (string, error) {
	r, err := b.c.Start(ctx, containers.StartRequest{DurableObjectNamespace: b.dons, ShardPod: b.pod,
		Name: in.Name, Image: in.Image, Args: in.Args, Env: in.Env, Internet: in.Internet})
	return r.Host, err
}

func (b managerBackend) Wait(ctx context.Context, name string) (int, error) {
	return b.c.Wait(ctx, b.pod, name)
}

func (b managerBackend) Stop(ctx context.Context, name string, grace time.Duration) error {
	return b.c.Stop(ctx, b.pod, name, grace)
}

func (b managerBackend) Remove(ctx context.Context, name string) error {
	return b.c.Remove(ctx, b.pod, name)
}
