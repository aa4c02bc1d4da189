package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// intruderNS is "another namespace" of the internal-plane tests: it runs a Worker of its
// own, so the manager issues it a certificate (from its own CA).
const intruderNS = "e2e-intruder"

// managerNS is the namespace of the install bundle's manager.
const managerNS = "workerd-operator-system"

// probe is one request to one internal port of a victim pod.
type probe struct {
	what, target string // target: "worker", "shard", "engine"
	port         int32
	method, path string
	body         string
	plain        bool // plain HTTP (the runner), else HTTPS
}

var internalProbes = []probe{
	{"workflow API create", "engine", podcontract.SidecarPort, http.MethodPost, "/workflows/orders/instances", `{"params":{"items":["forged"]}}`, false},
	{"workflow API event", "engine", podcontract.SidecarPort, http.MethodPost, "/workflows/orders/instances/x/events", `{"type":"payment-received","payload":{"amount":0}}`, false},
	{"workflow API list", "engine", podcontract.SidecarPort, http.MethodGet, "/workflows/orders/instances", "", false},
	{"runner step result", "engine", podcontract.SidecarPort, http.MethodPost, "/workflows/_run/attempt", `{"ok":true,"result":{"charged":true}}`, false},
	{"runner", "engine", podcontract.RunnerPort, http.MethodPost, "/run", `{}`, true},
	{"trigger", "worker", podcontract.TriggerPort, http.MethodPost, "/scheduled", `{"cron":"* * * * *","scheduledTime":0}`, false},
	{"trigger (engine pod)", "engine", podcontract.TriggerPort, http.MethodPost, "/scheduled", `{"cron":"* * * * *","scheduledTime":0}`, false},
	{"gateway", "shard", podcontract.GatewayPort, http.MethodGet, "/", "", false},
	{"rpc", "worker", podcontract.RPCPort, http.MethodGet, "/", "", false},
	{"rpc (shard pod)", "shard", podcontract.RPCPort, http.MethodGet, "/", "", false},
	{"channels info", "shard", podcontract.SidecarPort, http.MethodGet, "/channels/v1/info", "", false},
	{"channels publish", "shard", podcontract.SidecarPort, http.MethodPost, "/channels/v1/objects/x/room/publish", `{"channel":"c","message":"forged"}`, false},
}

// TestInternalPlaneRefusesOtherNamespace is Done means 2 of issue 20 with no
// NetworkPolicy engine running (the local cluster has none): from the pod network, as
// a caller of another namespace (no certificate, that namespace's own certificate, or a
// self-signed one naming the victim's namespace), every internal port of a Worker pod, a
// Durable Object shard pod and a Workflow engine pod of the samples refuses. The
// victim namespace's own certificate (the manager's, for trigger) is admitted, so the
// refusals come from who calls. Then the NetworkPolicies the operator applied, which
// nothing here enforces, are evaluated on the live pods (testenv.NetworkPolicies).
func TestInternalPlaneRefusesOtherNamespace(t *testing.T) {
	intruder := intruderWorker(t)
	var targets map[string]*corev1.Pod
	t.Run("authentication alone", func(t *testing.T) {
		ids := map[string]*tls.Certificate{
			"no certificate":              nil,
			intruderNS + "'s certificate": secretCert(t, intruderNS, podcontract.InternalTLSSecret),
			"self-signed as " + sampleNS:  forgedCert(t),
		}
		ownCert, mgrCert := secretCert(t, sampleNS, podcontract.InternalTLSSecret), secretCert(t, managerNS, podcontract.ManagerCASecret)
		// A refusal only counts from pods that served throughout: a sample pod replaced or
		// restarted by an earlier test's aftermath refuses everyone, which proves nothing.
		for attempt := 1; ; attempt++ {
			targets = victimPods(t)
			var errs []string
			for _, p := range internalProbes {
				for id, cert := range ids {
					got, refused := call(targets[p.target], p, cert)
					t.Logf("%-20s %-6s :%d %-4s %-36s as %-26s → %s", p.what, p.target, p.port, p.method, p.path, id, got)
					if !refused {
						errs = append(errs, fmt.Sprintf("%s on the %s pod :%d was not refused for %s: %s", p.what, p.target, p.port, id, got))
					}
				}
			}
			errs = append(errs, admitsOwnNamespace(t, targets, ownCert, mgrCert)...)
			changed := podsChanged(t, targets)
			if changed == "" || attempt == 3 {
				for _, e := range errs {
					t.Error(e)
				}
				if changed != "" {
					t.Errorf("the probed pods changed during every attempt: %s", changed)
				}
				break
			}
			t.Logf("attempt %d: %s; probing again", attempt, changed)
		}
	})
	t.Run("the operator's NetworkPolicies, evaluated", func(t *testing.T) {
		if targets == nil {
			t.Fatal("no victim pods (above)")
		}
		policiesRefuse(t, targets, intruder)
	})
}

// admitsOwnNamespace: the probes that may cross pods at all get through with the
// sample namespace's certificate (the manager's, for trigger), with a malformed body.
// It returns what was refused.
func admitsOwnNamespace(t *testing.T, targets map[string]*corev1.Pod, ownCert, mgrCert *tls.Certificate) []string {
	var errs []string
	for _, p := range internalProbes {
		if p.plain || strings.HasPrefix(p.path, "/workflows/_run/") || strings.HasPrefix(p.path, "/channels/") {
			continue // refused to every other pod
		}
		cert, id := ownCert, sampleNS+"'s certificate"
		if p.port == podcontract.TriggerPort {
			cert, id = mgrCert, "the manager's certificate"
		}
		if p.method == http.MethodPost {
			p.body = "{" // reaches the handler, which refuses it: nothing is created or run
		}
		got, refused := call(targets[p.target], p, cert)
		t.Logf("control: %-20s %-6s :%d as %-26s → %s", p.what, p.target, p.port, id, got)
		if refused {
			errs = append(errs, fmt.Sprintf("control: %s on the %s pod :%d refused %s: %s", p.what, p.target, p.port, id, got))
		}
	}
	return errs
}

// podsChanged says which of targets was replaced, restarted a container or stopped
// being ready since they were read; "" when none.
func podsChanged(t *testing.T, targets map[string]*corev1.Pod) string {
	t.Helper()
	var out []string
	for what, old := range targets {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(old), cur); err != nil {
			out = append(out, fmt.Sprintf("the %s pod %s: %v", what, old.Name, err))
			continue
		}
		switch {
		case cur.UID != old.UID:
			out = append(out, fmt.Sprintf("the %s pod %s was replaced", what, old.Name))
		case restarts(cur) != restarts(old):
			out = append(out, fmt.Sprintf("a container of the %s pod %s restarted (%d → %d restarts)", what, old.Name, restarts(old), restarts(cur)))
		case !podReady(cur) || cur.DeletionTimestamp != nil:
			out = append(out, fmt.Sprintf("the %s pod %s is no longer ready", what, old.Name))
		}
	}
	return strings.Join(out, "; ")
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// intruderWorker creates namespace intruderNS and a Worker there, waits for its pod
// and for the namespace's internal TLS Secret, and returns the pod.
func intruderWorker(t *testing.T) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: intruderNS}}
	// An earlier test's intruder namespace may still be terminating: wait for it to go.
	// Its Worker pod may take its whole grace period, 5 + 120 + 30 s (docs/durable-objects.md
	// "Rollouts"), when that test left connections to it open.
	eventually(t, 5*time.Minute, "namespace "+intruderNS+" created", func() error {
		cur := &corev1.Namespace{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: intruderNS}, cur); err == nil && cur.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is still terminating", intruderNS)
		}
		return client.IgnoreAlreadyExists(k8sClient.Create(ctx, ns.DeepCopy()))
	})
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: intruderNS, Name: "intruder"},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(module("intruder")),
			}}}},
		},
	}
	if err := k8sClient.Create(ctx, w); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	pod := &corev1.Pod{}
	eventually(t, 3*time.Minute, "the intruder's pod running", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(intruderNS), client.MatchingLabels{podcontract.LabelWorker: w.Name}); err != nil {
			return err
		}
		for i := range pods.Items {
			if pods.Items[i].Status.PodIP != "" {
				*pod = pods.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no pod with an IP yet")
	})
	return pod
}

// victimPods are a Worker pod, a shard pod and the engine pod of the samples.
func victimPods(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for target, name := range map[string]string{"shard": "rooms-do-0", "engine": "orders-wf-0"} {
		p := &corev1.Pod{}
		// A sample's pod may be in a rollout: probe it once it serves again.
		eventually(t, 4*time.Minute, name+" ready", func() error {
			if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
				return err
			}
			if !podReady(p) || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s not ready", name)
			}
			return nil
		})
		out[target] = p
	}
	pods := workerPods(t, "hello")
	if len(pods) == 0 {
		t.Fatal("no pod of Worker hello")
	}
	out["worker"] = &pods[0]
	return out
}

// secretCert is the client certificate in Secret name of namespace ns, once it exists.
func secretCert(t *testing.T, ns, name string) *tls.Certificate {
	t.Helper()
	var cert tls.Certificate
	eventually(t, 2*time.Minute, "Secret "+ns+"/"+name, func() error {
		s := &corev1.Secret{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		var err error
		cert, err = tls.X509KeyPair(s.Data[podcontract.InternalTLSCert], s.Data[podcontract.InternalTLSKey])
		return err
	})
	return &cert
}

// forgedCert is a certificate for the sample namespace's internal name, from a CA of
// the caller's own making.
func forgedCert(t *testing.T) *tls.Certificate {
	t.Helper()
	now := time.Now
	ca, err := internalca.New("forged", now())
	if err != nil {
		t.Fatal(err)
	}
	name := podcontract.InternalServerName(sampleNS)
	certPEM, keyPEM, err := ca.Issue(name, []string{name}, now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

// call sends p to pod presenting cert (none when nil) and says what came back and
// whether it is a refusal: no connection, a failed TLS handshake, or 401/403.
func call(pod *corev1.Pod, p probe, cert *tls.Certificate) (string, bool) {
	scheme, tc := "https", &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the caller does not care who answers
	if cert != nil {
		// Sent whatever CAs the server asks for (crypto/tls would otherwise send none).
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	if p.plain {
		scheme = "http"
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	url := scheme + "://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.port))) + p.path
	req, err := http.NewRequest(p.method, url, strings.NewReader(p.body))
	if err != nil {
		return err.Error(), false
	}
	resp, err := hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return "refused: " + op.Err.Error(), true
		}
		return "refused: " + err.Error(), true
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	got := fmt.Sprintf("%s %s", resp.Status, strings.TrimSpace(string(b)))
	return got, resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// policiesRefuse evaluates the sample namespace's NetworkPolicies on the live pods:
// the intruder's pod reaches no internal port; the pod of shop (the Worker binding the
// orders Workflow) reaches the engine's sidecar (env.WF.create()), rpc and gateway; the
// manager reaches trigger and the sidecar.
func policiesRefuse(t *testing.T, targets map[string]*corev1.Pod, intruder *corev1.Pod) {
	ctx := context.Background()
	nps := &networkingv1.NetworkPolicyList{}
	if err := k8sClient.List(ctx, nps, client.InNamespace(sampleNS)); err != nil {
		t.Fatal(err)
	}
	eval := testenv.NetworkPolicies{Policies: nps.Items, Namespaces: map[string]map[string]string{}}
	for _, ns := range []string{sampleNS, intruderNS, managerNS} {
		n := &corev1.Namespace{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		eval.Namespaces[ns] = n.Labels
	}
	mgrs := &corev1.PodList{}
	if err := k8sClient.List(ctx, mgrs, client.InNamespace(managerNS), client.MatchingLabels(podcontract.ManagerPodLabels())); err != nil || len(mgrs.Items) == 0 {
		t.Fatalf("manager pods: %v (%d)", err, len(mgrs.Items))
	}
	shop := workerPods(t, "shop")
	if len(shop) == 0 {
		t.Fatal("no pod of Worker shop")
	}
	callers := map[string]*corev1.Pod{"intruder": intruder, "shop Worker": &shop[0], "manager": &mgrs.Items[0]}
	want := map[string]map[int32]bool{
		"intruder":    {},
		"shop Worker": {podcontract.SidecarPort: true, podcontract.RPCPort: true, podcontract.GatewayPort: true},
		"manager":     {podcontract.SidecarPort: true, podcontract.TriggerPort: true},
	}
	for _, p := range internalProbes {
		for name, from := range callers {
			got, err := eval.Allowed(policyPod(from), policyPod(targets[p.target]), p.port)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("policy: %-14s → %-6s :%d (%s) allowed %v", name, p.target, p.port, p.what, got)
			if got != want[name][p.port] {
				t.Errorf("policy: %s → %s pod :%d allowed %v, want %v", name, p.target, p.port, got, !got)
			}
		}
	}
}

func policyPod(p *corev1.Pod) testenv.PolicyPod {
	return testenv.PolicyPod{Namespace: p.Namespace, Labels: p.Labels, IP: p.Status.PodIP, Spec: &p.Spec}
}
