package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/containers"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// containersFlags configure the containers API (internal/containers): shard sidecars
// ask the manager to run their container instances as pods.
type containersFlags struct {
	bindAddress  string
	startTimeout time.Duration
}

func (c *containersFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.bindAddress, "containers-bind-address", fmt.Sprintf(":%d", podcontract.ContainersAPIPort),
		"address of the containers API, where shard sidecars ask for container instances (mutual TLS with their namespace's certificate); 0 disables it")
	fl.DurationVar(&c.startTimeout, "containers-start-timeout", containers.DefaultStartTimeout,
		"how long a container instance's pod may take to run (image pull, scheduling) before its start fails")
}

// setup serves the containers API on every replica (a sidecar reaches any of them
// through the Service), with a certificate the manager's CA issues for the Service's
// names. Call it once f.opts is complete: instance pods honour its isolation settings.
func (c *containersFlags) setup(mgr ctrl.Manager, f *managerFlags) error {
	if c.bindAddress == "" || c.bindAddress == "0" {
		return nil
	}
	ns := os.Getenv("POD_NAMESPACE")
	cl, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	cert := &servingCert{ca: f.opts.Issuer.Manager,
		names: []string{podcontract.ContainersAPIShortHost(ns), podcontract.ContainersAPIHost(ns, f.opts.ClusterDomain)}}
	if _, err := cert.get(nil); err != nil {
		return fmt.Errorf("containers API certificate: %w", err)
	}
	srv := &containers.Server{Client: cl, Log: ctrl.Log.WithName("containers"),
		Events:  mgr.GetEventRecorder(podcontract.ContainersAPIService),
		Options: f.opts, NetworkPolicies: f.opts.NetworkPolicies, StartTimeout: c.startTimeout}
	srv.Namespaced = map[string]containers.NamespacedHandler{userworkers.Path: &userworkers.Handler{
		Workers: mgr.GetClient(), ConfigMaps: mgr.GetAPIReader(), Log: ctrl.Log.WithName("user-workers")}}
	// No WriteTimeout: Start holds its answer until the pod runs and Wait long-polls.
	hs := &http.Server{Handler: srv, TLSConfig: containers.ServerTLSConfig(cert.get),
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	addr := c.bindAddress
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("containers API: %w", err)
		}
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
		}()
		ctrl.Log.WithName("containers").Info("serving the containers API", "address", ln.Addr().String())
		if err := hs.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}))
}

// servingCert is the containers API's certificate, issued by the manager's CA and
// issued again before it expires.
type servingCert struct {
	ca    *internalca.CA
	names []string

	mu   sync.Mutex
	cert *tls.Certificate
}

func (s *servingCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.cert != nil && now.Add(internalca.RenewBefore).Before(s.cert.Leaf.NotAfter) {
		return s.cert, nil
	}
	certPEM, keyPEM, err := s.ca.Issue(podcontract.ContainersAPIService, s.names, now)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	s.cert = &cert
	return s.cert, nil
}
