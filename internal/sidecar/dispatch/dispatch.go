// Package dispatch is the sidecar's dispatcher of Workers for Platforms: a Worker's
// dispatchNamespace binding (shim dispatch.js) sends each get(name).fetch() here, naming
// the dispatch namespace (podcontract.DispatchNamespaceHeader, injected by the config)
// and the user Worker (podcontract.DispatchScriptHeader); the dispatcher forwards the
// request to that Worker's rpc Service (render.DispatchServiceName), over the
// namespace's mutual TLS when the cluster uses it. A Worker outside the dispatch
// namespace has no such Service, so it is "not found" like a name nobody deployed.
package dispatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// Options configure a Dispatcher.
type Options struct {
	// Domain is the DNS domain of the pod's namespace (podcontract.DispatchDomainEnv).
	Domain string
	// Port is the user Workers' rpc port; zero is podcontract.RPCPort.
	Port int32
	// TLS, when set, is the client config of the namespace's internal plane (the pod's
	// certificate, trusting the namespace's CA); nil speaks plain HTTP.
	TLS *tls.Config
	// Logf logs a forwarding failure; nil discards.
	Logf func(format string, a ...any)
	// Code, when set, is the manager's internal API, from which Shared user Workers'
	// code is read (shim dispatch.js loads them); nil: every user Worker is Dedicated.
	Code *userworkers.Client
	// CodeTTL is how long an answer about a user Worker is kept (DefaultCodeTTL).
	CodeTTL time.Duration
}

// Dispatcher forwards dispatched calls to user Workers.
type Dispatcher struct {
	o     Options
	proxy *httputil.ReverseProxy
	code  *codeCache
}

// New makes a Dispatcher.
func New(o Options) *Dispatcher {
	if o.Port == 0 {
		o.Port = podcontract.RPCPort
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	d := &Dispatcher{o: o}
	if o.Code != nil {
		if o.CodeTTL <= 0 {
			o.CodeTTL = DefaultCodeTTL
		}
		d.code = &codeCache{client: o.Code, ttl: o.CodeTTL, logf: o.Logf, entries: map[string]*codeEntry{},
			newNames: rate.NewLimiter(newNamesPerSecond, newNamesBurst)}
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       o.TLS,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	d.proxy = &httputil.ReverseProxy{Rewrite: d.rewrite, Transport: tr, ErrorHandler: d.failed, FlushInterval: -1,
		ModifyResponse: func(r *http.Response) error {
			// Only the dispatcher says "not found"; a user Worker's header would fake it.
			r.Header.Del(podcontract.DispatchErrorHeader)
			return nil
		}}
	return d
}

// scriptKey holds the user Worker's name in a request's context (the outgoing request
// no longer carries its header when the proxy reports an error).
type scriptKey struct{}

// ServeHTTP forwards one dispatched call, or answers not-found for a name no user
// Worker of the dispatch namespace can have.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, script := r.Header.Get(podcontract.DispatchNamespaceHeader), r.Header.Get(podcontract.DispatchScriptHeader)
	if len(validation.IsDNS1123Label(ns)) > 0 {
		http.Error(w, fmt.Sprintf("dispatch: the binding's dispatch namespace %q is not a DNS label", ns), http.StatusInternalServerError)
		return
	}
	if len(script) > render.MaxUserWorkerName || len(validation.IsDNS1123Label(script)) > 0 {
		notFound(w)
		return
	}
	if r.Header.Get(podcontract.DispatchResolveHeader) != "" {
		d.resolve(w, r, ns, script)
		return
	}
	// The sidecar gives a request's body a deadline for all of it; a dispatched upload
	// may stream for longer, so the deadline applies to each read instead.
	if rb, ok := r.Body.(renewer); ok {
		r.Body = renewingBody{rb}
	}
	d.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scriptKey{}, script)))
}

// renewer is the sidecar's deadline body (sidecar.deadlineBody).
type renewer interface {
	io.ReadCloser
	RenewDeadline()
}

type renewingBody struct{ renewer }

func (b renewingBody) Read(p []byte) (int, error) {
	b.RenewDeadline()
	return b.renewer.Read(p)
}

// rewrite aims the request at the user Worker's rpc Service, keeping the Host the
// dispatcher gave (the user Worker's request.url), without the dispatch headers.
func (d *Dispatcher) rewrite(pr *httputil.ProxyRequest) {
	in := pr.In.Header
	// A fully qualified name: the pod's search domains are not tried first.
	host := fmt.Sprintf("%s.%s.:%d", render.DispatchServiceName(in.Get(podcontract.DispatchNamespaceHeader), in.Get(podcontract.DispatchScriptHeader)), strings.TrimSuffix(d.o.Domain, "."), d.o.Port)
	base := "http://"
	if d.o.TLS != nil {
		base = "https://"
	}
	u, _ := url.Parse(base + host) // host: DNS labels and a port
	pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
	pr.Out.Host = pr.In.Host
	// Rewrite drops X-Forwarded-*; the dispatch Worker's own are the user Worker's.
	for k, v := range in {
		if strings.HasPrefix(k, "X-Forwarded-") {
			pr.Out.Header[k] = v
		}
	}
	// Without it the user Worker's rpc socket gives request.url its own scheme, http.
	pr.Out.Header.Del(podcontract.ForwardedProtoHeader)
	if in.Get(podcontract.DispatchProtoHeader) == "https" {
		pr.Out.Header.Set(podcontract.ForwardedProtoHeader, "https")
	}
	for k := range pr.Out.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-workerd-operator-") {
			pr.Out.Header.Del(k)
		}
	}
}

// failed answers a call that reached no user Worker: not-found when its name does not
// resolve, else 502 naming the cause.
func (d *Dispatcher) failed(w http.ResponseWriter, r *http.Request, err error) {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		notFound(w)
		return
	}
	script, _ := r.Context().Value(scriptKey{}).(string)
	d.o.Logf("dispatch: user Worker %q: %v", script, err)
	http.Error(w, fmt.Sprintf("dispatch: user Worker %q did not answer: %s", script, strings.TrimSpace(errText(err))), http.StatusBadGateway)
}

func errText(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

func notFound(w http.ResponseWriter) {
	w.Header().Set(podcontract.DispatchErrorHeader, podcontract.DispatchNotFound)
	http.Error(w, "Worker not found", http.StatusNotFound)
}
