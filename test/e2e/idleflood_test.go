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
// files`), the chat Service's Durable Object calls keep answering (their p99s are
// logged), and no container of the victims restarts.
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
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	testenv.IdleFlood{
		Targets: []string{
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.TriggerPort)),
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.RPCPort)),
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.SidecarPort)),
			net.JoinHostPort(shard.Status.PodIP, strconv.Itoa(podcontract.GatewayPort)),
		},
		PerTarget: floodPerPort(),
		Dial:      func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) },
		Call:      func() error { _, err := get(url); return err },
		Wait:      sidecar.DefaultCrossPodHandshakeTimeout + 2*time.Second,
	}.Run(t)
	if after := victimRestarts(t, victims); after != restartsBefore {
		t.Errorf("victim container restarts %d → %d", restartsBefore, after)
	}
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
