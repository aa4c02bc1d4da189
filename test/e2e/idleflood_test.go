package e2e

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// floodPerPort is how many idle connections the flood opens to each port: 4 ports of
// 5,000 are the 20,000 of issue 34's bar, more than the 12,249 that crashed workerd and
// the 19,900 that exhausted the sidecar's descriptors (E2E_FLOOD_PER_PORT overrides it).
func floodPerPort() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_FLOOD_PER_PORT")); err == nil && n > 0 {
		return n
	}
	return 5000
}

// TestIdleFloodOnWorkerdPorts: from another namespace's pod address, thousands of
// connections that never start a TLS handshake to a Worker pod's trigger and rpc ports,
// its sidecar's cross-pod port and a Durable Object shard's gateway port. None of them is still open past the
// handshake timeout (workerd kept them forever and crashed on `accept(): Too many open
// files`), the chat Service's Durable Object calls keep answering with a p99 within 2×
// of the unattacked one, and no container of the victims restarts.
func TestIdleFloodOnWorkerdPorts(t *testing.T) {
	src := net.ParseIP(intruderWorker(t).Status.PodIP)
	chat, shard := workerPods(t, "chat"), &corev1.Pod{}
	if len(chat) == 0 {
		t.Fatal("no pod of Worker chat")
	}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "rooms-do-0"}, shard); err != nil {
		t.Fatal(err)
	}
	victims := []*corev1.Pod{&chat[0], shard}
	restartsBefore := victimRestarts(t, victims)
	url := serviceURL(t, "chat") + "/rooms/e2e-flood/messages"
	base := latencies(t, url, 200)
	targets := []string{
		net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.TriggerPort)),
		net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.RPCPort)),
		net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.SidecarPort)),
		net.JoinHostPort(shard.Status.PodIP, strconv.Itoa(podcontract.GatewayPort)),
	}
	var held []net.Conn
	opened := 0
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for _, addr := range targets {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
			n, open := testenv.Flood(func() (net.Conn, error) { return d.Dial("tcp", addr) }, floodPerPort(), testenv.FloodRate)
			opened += n
			held = append(held, open...)
		}
	}()
	attacked, errs := testenv.TimeUntil(func() error { _, err := get(url); return err }, 200, flooding)
	<-flooding
	for _, err := range errs {
		t.Errorf("GET %s under attack: %v", url, err)
	}
	t.Cleanup(func() { testenv.CloseAll(held) })
	time.Sleep(sidecar.DefaultCrossPodHandshakeTimeout + 2*time.Second)
	open := len(testenv.StillOpen(held))
	t.Logf("flood: %d connections from %s opened to %v; %d still open after %s", opened, src, targets, open, sidecar.DefaultCrossPodHandshakeTimeout+2*time.Second)
	if open > 0 {
		t.Errorf("%d idle connections without a handshake outlived the handshake timeout", open)
	}
	p99Base, p99Attacked := testenv.P99(base), testenv.P99(attacked)
	t.Logf("chat Durable Object call p99: unattacked %s, attacked %s", p99Base, p99Attacked)
	// 2× (issue 34's bar), with a 25 ms floor: single-digit-millisecond p99s on a
	// shared 2-core machine vary by more than 2× without any attack.
	if limit := max(2*p99Base, p99Base+25*time.Millisecond); p99Attacked > limit {
		t.Errorf("p99 under attack %s, want at most %s", p99Attacked, limit)
	}
	if after := victimRestarts(t, victims); after != restartsBefore {
		t.Errorf("victim container restarts %d → %d", restartsBefore, after)
	}
}

// latencies times n GETs of url, each of which must answer 200.
func latencies(t *testing.T, url string, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := get(url); err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		out = append(out, time.Since(start))
	}
	return out
}

// victimRestarts sums the restart counts of the pods' containers, sidecar included.
func victimRestarts(t *testing.T, pods []*corev1.Pod) int32 {
	t.Helper()
	var n int32
	for _, p := range pods {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			t.Fatal(err)
		}
		if cur.UID != p.UID {
			t.Errorf("pod %s was replaced", p.Name)
		}
		for _, s := range append(cur.Status.InitContainerStatuses, cur.Status.ContainerStatuses...) {
			n += s.RestartCount
		}
	}
	return n
}
