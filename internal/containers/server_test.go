package containers_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/containers"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

const (
	nsA, nsB   = "team-a", "team-b"
	image      = "registry.example/app:1"
	shardName  = "rooms-shards-0"
	serverName = "containers.test"
)

// fixture is a real API server with namespaces A and B (their internal TLS Secrets),
// DurableObjectNamespace "rooms" in A (maxInstances 2) with a shard pod and a pod that
// is no shard, and the containers API served over TLS with the manager's certificate.
type fixture struct {
	c     client.WithWatch
	plane *internalca.Plane
	url   string
	srv   *containers.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := testenv.Start(t)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	plane, err := internalca.NewPlane(nsA, nsB)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{nsA, nsB} {
		mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podcontract.InternalTLSSecret}, Data: plane.Namespaces[ns]})
	}
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "rooms"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "chat"}, ClassName: "Room",
			Container: &fleetv1alpha1.ContainerSpec{Image: image, MaxInstances: ptr.To[int32](2), InstanceType: "basic"}}}
	mustCreate(t, c, d)
	mustCreate(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: shardName, Labels: specs.DONSSelector(d)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podcontract.WorkerdContainer, Image: "workerd"}}}})
	mustCreate(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web-0", Labels: specs.WorkerSelector("chat")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podcontract.WorkerdContainer, Image: "workerd"}}}})

	srv := &containers.Server{Client: c, Log: testr.New(t), Options: specs.DefaultOptions(), NetworkPolicies: true,
		StartTimeout: 20 * time.Second, WaitPoll: 2 * time.Second}
	certPEM, keyPEM, err := plane.Manager.Issue("containers", []string{serverName}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = containers.ServerTLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil })
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return &fixture{c: c, plane: plane, url: hs.URL, srv: srv}
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// client is a sidecar's client presenting certPEM/keyPEM (nil: no certificate).
func (f *fixture) client(t *testing.T, certPEM, keyPEM []byte) *containers.Client {
	t.Helper()
	pool, err := internalca.Pool(f.plane.Manager.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return containers.NewClient(f.url, cfg)
}

// nsClient presents namespace ns's pod certificate.
func (f *fixture) nsClient(t *testing.T, ns string) *containers.Client {
	d := f.plane.Namespaces[ns]
	return f.client(t, d[podcontract.InternalTLSCert], d[podcontract.InternalTLSKey])
}

// setStatus waits for the instance pod and writes status into it, as a kubelet would.
func (f *fixture) setStatus(t *testing.T, name string, status func(*corev1.PodStatus)) {
	t.Helper()
	key := types.NamespacedName{Namespace: nsA, Name: specs.ContainerPodName(nsA, shardName, name)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := &corev1.Pod{}
		err := f.c.Get(context.Background(), key, p)
		if err == nil {
			status(&p.Status)
			if err = f.c.Status().Update(context.Background(), p); err == nil {
				return
			}
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) || time.Now().After(deadline) {
			t.Errorf("status of %s: %v", key.Name, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func running(ip string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase, s.PodIP, s.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.ContainerInstanceContainer, Image: image, ImageID: image,
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	}
}

func exited(code int32) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.ContainerInstanceContainer, Image: image, ImageID: image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}
	}
}

// start starts instance name as namespace A's shard and plays the kubelet: the pod runs
// at ip.
func (f *fixture) start(t *testing.T, name, ip string) (containers.StartResponse, error) {
	t.Helper()
	go f.setStatus(t, name, running(ip))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.nsClient(t, nsA).Start(ctx, startRequest(name))
}

func startRequest(name string) containers.StartRequest {
	return containers.StartRequest{DurableObjectNamespace: "rooms", ShardPod: shardName, Name: name, Image: image,
		Args: []string{"serve", "--port=8080"}, Env: []string{"CLOUDFLARE_DURABLE_OBJECT_ID=abc", "X=1"}, Internet: true}
}

func wantStatus(t *testing.T, what string, err error, status int, text string) {
	t.Helper()
	if containers.StatusCode(err) != status || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: %v (status %d); want %d with %q", what, err, containers.StatusCode(err), status, text)
	}
}

func (f *fixture) exists(t *testing.T, name string) bool {
	t.Helper()
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: nsA, Name: specs.ContainerPodName(nsA, shardName, name)}, &corev1.Pod{})
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

func TestContainersAPI(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := f.nsClient(t, nsA)
	long := "workerd-session-" + strings.Repeat("k", 30) + "-" + strings.Repeat("0f", 32)

	t.Run("start creates the pod and returns its IP", func(t *testing.T) {
		out, err := f.start(t, long, "10.1.0.1")
		if err != nil || out.Host != "10.1.0.1" || out.Pod != specs.ContainerPodName(nsA, shardName, long) {
			t.Fatalf("start: %+v, %v", out, err)
		}
		p := &corev1.Pod{}
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: nsA, Name: out.Pod}, p); err != nil {
			t.Fatal(err)
		}
		c := p.Spec.Containers[0]
		if c.Image != image || strings.Join(c.Args, " ") != "serve --port=8080" || len(c.Env) != 2 ||
			p.Annotations[podcontract.AnnotationContainerName] != long || p.Labels[podcontract.LabelInternet] != "true" ||
			len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Name != shardName || c.Resources.Limits.Memory().String() != "1Gi" {
			t.Errorf("pod: %+v", p)
		}
		for _, name := range []string{specs.ContainerNetworkPolicyName("rooms"), specs.ContainerInternetPolicyName("rooms")} {
			if err := f.c.Get(ctx, types.NamespacedName{Namespace: nsA, Name: name}, &networkingv1.NetworkPolicy{}); err != nil {
				t.Errorf("NetworkPolicy %s: %v", name, err)
			}
		}
		again, err := a.Start(ctx, startRequest(long)) // the pod runs: the same one, at once
		if err != nil || again != out {
			t.Errorf("second start: %+v, %v", again, err)
		}
	})

	t.Run("policy refusals", func(t *testing.T) {
		r := startRequest("other")
		r.Image = "registry.example/evil:1"
		_, err := a.Start(ctx, r)
		wantStatus(t, "another image", err, http.StatusForbidden, "spec.container.image")
		r = startRequest("other")
		r.ShardPod = "web-0"
		_, err = a.Start(ctx, r)
		wantStatus(t, "a pod that is no shard", err, http.StatusForbidden, "not a shard pod")
		r = startRequest("other")
		r.Env = []string{"BIG=" + strings.Repeat("x", containers.MaxArgsEnvBytes)}
		_, err = a.Start(ctx, r)
		wantStatus(t, "args and env too large", err, http.StatusBadRequest, "bytes")
		r = startRequest("other")
		r.Env = []string{"NOVALUE"}
		_, err = a.Start(ctx, r)
		wantStatus(t, "env without =", err, http.StatusBadRequest, "NAME=value")
		if f.exists(t, "other") {
			t.Error("a refused start created a pod")
		}
	})

	t.Run("another namespace reaches nothing of A", func(t *testing.T) {
		b := f.nsClient(t, nsB)
		_, err := b.Start(ctx, startRequest("from-b"))
		wantStatus(t, "start", err, http.StatusNotFound, "not found in namespace "+nsB)
		wantStatus(t, "stop", b.Stop(ctx, shardName, long, 0), http.StatusNotFound, "no container instance")
		if err := b.Remove(ctx, shardName, long); err != nil {
			t.Errorf("remove of an instance B does not have: %v", err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if code, err := b.Wait(wctx, shardName, long); err != nil || code != containers.ExitCodeGone {
			t.Errorf("wait: %d, %v (B has no such instance)", code, err)
		}
		if !f.exists(t, long) {
			t.Fatal("namespace B's calls touched A's instance")
		}
	})

	t.Run("certificates", func(t *testing.T) {
		_, err := f.client(t, nil, nil).Start(ctx, startRequest("x"))
		if err == nil || containers.StatusCode(err) != 0 {
			t.Errorf("no certificate: %v; want a TLS failure", err)
		}
		// B's CA signs a certificate naming A: A's CA does not verify it.
		caB, err := internalca.Parse(f.plane.Namespaces[nsB][podcontract.InternalTLSCA], f.plane.Namespaces[nsB][podcontract.InternalTLSCAKey])
		if err != nil {
			t.Fatal(err)
		}
		name := podcontract.InternalServerName(nsA)
		certPEM, keyPEM, err := caB.Issue(name, []string{name}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		forged := f.client(t, certPEM, keyPEM)
		_, err = forged.Start(ctx, startRequest("x"))
		wantStatus(t, "A's name signed by B's CA: start", err, http.StatusUnauthorized, "does not verify")
		wantStatus(t, "A's name signed by B's CA: remove", forged.Remove(ctx, shardName, long), http.StatusUnauthorized, "does not verify")
		// The manager's own client certificate names no namespace.
		_, err = f.client(t, f.plane.ManagerCert, f.plane.ManagerKey).Start(ctx, startRequest("x"))
		wantStatus(t, "manager certificate", err, http.StatusUnauthorized, "exactly one")
		if !f.exists(t, long) {
			t.Fatal("a forged certificate removed A's instance")
		}
	})

	t.Run("maxInstances", func(t *testing.T) {
		if _, err := f.start(t, "second", "10.1.0.2"); err != nil {
			t.Fatal(err)
		}
		_, err := a.Start(ctx, startRequest("third"))
		wantStatus(t, "third of 2", err, http.StatusTooManyRequests, "maxInstances (2) of DurableObjectNamespace rooms reached")
	})

	t.Run("wait returns the exit code", func(t *testing.T) {
		got := make(chan error, 1)
		var code int
		go func() {
			var err error
			code, err = a.Wait(ctx, shardName, "second")
			got <- err
		}()
		time.Sleep(500 * time.Millisecond) // Wait is waiting
		f.setStatus(t, "second", exited(3))
		if err := <-got; err != nil || code != 3 {
			t.Fatalf("wait: %d, %v; want 3", code, err)
		}
		// The exited instance no longer counts: a third one fits.
		if _, err := f.start(t, "third", "10.1.0.3"); err != nil {
			t.Errorf("start after an exit: %v", err)
		}
		wantStatus(t, "stop of an exited instance", a.Stop(ctx, shardName, "second", time.Second), http.StatusConflict, "not running")
	})

	t.Run("stop and remove", func(t *testing.T) {
		if err := a.Stop(ctx, shardName, "third", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if code, err := a.Wait(ctx, shardName, "third"); err != nil || code != containers.ExitCodeGone {
			t.Errorf("wait after stop: %d, %v", code, err)
		}
		if err := a.Remove(ctx, shardName, long); err != nil {
			t.Fatal(err)
		}
		if f.exists(t, long) {
			t.Error("remove returned before the pod was gone")
		}
		if err := a.Remove(ctx, shardName, "never-started"); err != nil {
			t.Errorf("remove of an unknown instance: %v", err)
		}
	})

	t.Run("an image that cannot be pulled", func(t *testing.T) {
		go f.setStatus(t, "pull", func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.ContainerInstanceContainer, Image: image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "manifest unknown"}}}}
		})
		_, err := a.Start(ctx, startRequest("pull"))
		wantStatus(t, "pull error", err, http.StatusInternalServerError, `image "`+image+`" cannot run in pod`)
		if err != nil && !strings.Contains(err.Error(), "ErrImagePull") {
			t.Errorf("the error does not name the waiting reason: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		if f.exists(t, "pull") {
			t.Error("the pod of a failed start is left behind")
		}
	})
}
