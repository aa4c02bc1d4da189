package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// reacherModule fetches ?u= or exchanges a line with the TCP peer ?a= over connect()
// (cloudflare:sockets), and says what it got or the error it caught.
const reacherModule = `import { connect } from "cloudflare:sockets";
export default {
  async fetch(request) {
    const q = new URL(request.url).searchParams;
    try {
      if (q.has("noop")) return new Response("noop");
      if (q.has("u")) {
        const r = await fetch(q.get("u"));
        return new Response("fetch " + r.status + " " + (await r.text()));
      }
      const s = connect(q.get("a"));
      const w = s.writable.getWriter();
      await w.write(new TextEncoder().encode("ping\n"));
      const { value } = await s.readable.getReader().read();
      await s.close();
      return new Response("tcp " + new TextDecoder().decode(value).trim());
    } catch (e) {
      return new Response("error " + e.message);
    }
  },
};
`

// tcpEcho listens on addr and answers every line with "echo <line>": the peer of the
// Worker's connect() (the thing under test is workerd and the rendered policy).
func tcpEcho(t testing.TB, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					l, err := rd.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, "echo "+l); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// podCIDRAddr is an address of the local cluster's Pod CIDR far above the addresses it
// hands out (they count up from .0.2), for test peers that stand in for pods.
func podCIDRAddr(t testing.TB, last byte) string {
	t.Helper()
	ip, _, err := net.ParseCIDR(cluster.ClusterCIDRs()[0])
	if err != nil {
		t.Fatal(err)
	}
	ip4 := ip.To4()
	return net.IPv4(ip4[0], ip4[1], 250, last).String() + ":0"
}

// TestOutbound is Done means 1 of issue 23 through real workerd pods: under the
// operator's default (the cluster's Service and Pod CIDRs and the public internet) a
// Worker fetches another Worker's Service by its cluster name and a pod by its IP, and
// exchanges a line with a TCP peer over connect(); fetch() and connect() to a CIDR its
// spec.outbound denies are refused, the Worker's log names the refused address in a
// line classified outbound_denied, and the manager's log scan records it in the
// Worker's status.lastFailure, Degraded condition and a Warning Event (docs/outbound.md).
func TestOutbound(t *testing.T) {
	echo := tcpEcho(t, podCIDRAddr(t, 10))
	denied := tcpEcho(t, podCIDRAddr(t, 11))
	deniedHost, _, _ := net.SplitHostPort(denied)
	w := newReacher(t, "reacher", &fleetv1alpha1.OutboundSpec{Deny: []string{deniedHost + "/32"}})
	base := serviceURL(t, w.Name) + "/?"
	hello := workerPods(t, "hello")[0]
	byName := helloByName(t) + "/by-name"
	byIP := fmt.Sprintf("http://%s/by-ip", net.JoinHostPort(hello.Status.PodIP, fmt.Sprint(httpPort(hello))))
	for _, c := range []struct{ query, want string }{
		{"u=" + url.QueryEscape(byName), "fetch 200 Hello from workerd-operator! You asked for /by-name"},
		{"u=" + url.QueryEscape(byIP), "fetch 200 Hello from workerd-operator! You asked for /by-ip"},
		{"a=" + echo, "tcp echo ping"},
	} {
		eventually(t, time.Minute, c.query, func() error {
			got, err := get(base + c.query)
			if err != nil || !strings.HasPrefix(got, c.want) {
				return fmt.Errorf("got %q, %v; want %q", got, err, c.want)
			}
			return nil
		})
	}
	for _, q := range []string{"u=" + url.QueryEscape("http://"+denied+"/"), "a=" + denied} {
		got, err := get(base + q)
		if err != nil || !strings.HasPrefix(got, "error ") {
			t.Errorf("%s (denied): got %q, %v; want an error", q, got, err)
		}
	}
	deniedLogged(t, w.Name, denied)
	deniedInStatus(t, w.Name, denied)
}

// newReacher creates a Worker running reacherModule under spec.outbound o and waits
// until it is Ready.
func newReacher(t testing.TB, name string, o *fleetv1alpha1.OutboundSpec) *fleetv1alpha1.Worker {
	t.Helper()
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1), Outbound: o,
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(reacherModule),
			}}}},
		},
	}
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	waitWorkerReady(t, w.Name)
	return w
}

// helloByName is the hello sample's in-cluster URL by Service name.
func helloByName(t testing.TB) string {
	svc, err := cluster.Client().CoreV1().Services(sampleNS).Get(context.Background(), "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://hello.%s.svc.cluster.local:%d", sampleNS, svc.Spec.Ports[0].Port)
}

// BenchmarkOutboundService compares, in one run on the local cluster, GETs of the hello
// sample's Service by a plain Go client (direct, to the ClusterIP), the hop to a Worker
// that answers without fetching (worker-noop), and the same GET made by that Worker's
// fetch() by Service name through its network service (via-worker). The outbound path
// adds about via-worker minus worker-noop. Metrics: p50-us, p99-us.
//
//	go test ./test/e2e -run '^$' -bench OutboundService -benchtime 1000x
func BenchmarkOutboundService(b *testing.B) {
	newReacher(b, "bench-reacher", nil)
	base := serviceURL(b, "bench-reacher") + "/?"
	direct := serviceURL(b, "hello")
	for _, tc := range []struct{ name, url, want string }{
		{"direct", direct + "/b", "Hello from workerd-operator! You asked for /b"},
		{"worker-noop", base + "noop=1", "noop"},
		{"via-worker", base + "u=" + url.QueryEscape(helloByName(b)+"/b"), "fetch 200 Hello from workerd-operator! You asked for /b"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				got, err := get(tc.url)
				if err != nil || !strings.HasPrefix(got, tc.want) {
					b.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
		})
	}
}

func httpPort(p corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == podcontract.HTTPPortName {
				return port.ContainerPort
			}
		}
	}
	return 0
}

// deniedLogged: the Worker's workerd log has workerd's line naming the refused address,
// and the failure classifier calls it outbound_denied.
func deniedLogged(t *testing.T, worker, addr string) {
	t.Helper()
	eventually(t, 30*time.Second, "the refusal in the workerd log", func() error {
		for _, p := range workerPods(t, worker) {
			b, err := workerdLog(p)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(b, "\n") {
				if !strings.Contains(line, "connecting to "+addr+" is not allowed") {
					continue
				}
				if c := failure.ClassifyMessage(line); c != failure.CauseOutboundDenied {
					return fmt.Errorf("line %q classified %q, want %q", line, c, failure.CauseOutboundDenied)
				}
				return nil
			}
		}
		return fmt.Errorf("no line naming %s is not allowed", addr)
	})
}

// workerdLog is the workerd container's log of pod p.
func workerdLog(p corev1.Pod) (string, error) { return containerLog(p, podcontract.WorkerdContainer) }

// containerLog is the log of container c of pod p.
func containerLog(p corev1.Pod, c string) (string, error) {
	rc, err := cluster.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c}).Stream(context.Background())
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// deniedInStatus: the manager's scan of the workerd log (--failure-log-scan-interval,
// default 1m) records the refusal in the Worker's status: lastFailure outbound_denied
// naming the address, the pod and the time, no exit code (the container runs on),
// Degraded with that reason, and a Warning Event with it.
func deniedInStatus(t *testing.T, worker, addr string) {
	t.Helper()
	pods := map[string]bool{}
	for _, p := range workerPods(t, worker) {
		pods[p.Name] = true
	}
	eventually(t, 3*time.Minute, "status.lastFailure outbound_denied", func() error {
		w := &fleetv1alpha1.Worker{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: worker}, w); err != nil {
			return err
		}
		f := w.Status.LastFailure
		if f == nil || f.Cause != string(failure.CauseOutboundDenied) || !strings.Contains(f.Message, "connecting to "+addr+" is not allowed") ||
			!pods[f.Pod] || f.Container != podcontract.WorkerdContainer || f.Time == nil || f.ExitCode != nil {
			return fmt.Errorf("lastFailure %+v", f)
		}
		c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(failure.CauseOutboundDenied) || !strings.Contains(c.Message, addr) {
			return fmt.Errorf("Degraded %+v", c)
		}
		return nil
	})
	eventually(t, time.Minute, "a Warning Event outbound_denied", func() error {
		evs := &eventsv1.EventList{}
		if err := k8sClient.List(context.Background(), evs, client.InNamespace(sampleNS)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Worker" && e.Regarding.Name == worker && e.Type == corev1.EventTypeWarning &&
				e.Reason == string(failure.CauseOutboundDenied) && strings.Contains(e.Note, addr) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(evs.Items))
	})
}
