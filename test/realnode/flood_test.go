package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// floodPerPort: 4 ports of 5,000 are the 20,000 connections of issue 34's bar.
const floodPerPort = 5000

// TestIdleFloodFromAnotherNamespace: from the network namespace of a pod of another
// namespace (the manager's), 20,000 connections that never start a TLS handshake to a
// chat pod's trigger, rpc and sidecar ports and a rooms shard's gateway port. None is
// still open past the handshake timeout, the chat Service's Durable Object calls all
// answer (their p99, unattacked and attacked, is logged), and no victim container
// restarts.
func TestIdleFloodFromAnotherNamespace(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	pid := managerPID(t)
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(ctx, "chat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chat := podsOf(t, sampleNS, svc.Spec.Selector)
	shard, err := cluster.client.CoreV1().Pods(sampleNS).Get(ctx, "rooms-do-0", metav1.GetOptions{})
	if err != nil || len(chat) == 0 {
		t.Fatalf("victims: %d chat pods, shard: %v", len(chat), err)
	}
	victims := []corev1.Pod{chat[0], *shard}
	before := restartCounts(t, victims)
	url := serviceURL(t, "chat") + "/rooms/realnode-flood/messages"
	testenv.IdleFlood{
		Targets: []string{
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.TriggerPort)),
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.RPCPort)),
			net.JoinHostPort(chat[0].Status.PodIP, strconv.Itoa(podcontract.SidecarPort)),
			net.JoinHostPort(shard.Status.PodIP, strconv.Itoa(podcontract.GatewayPort)),
		},
		PerTarget: floodPerPort,
		Dial:      func(addr string) (net.Conn, error) { return dialFromNetns(pid, addr) },
		Call:      func() error { _, err := get(url); return err },
		Wait:      sidecar.DefaultCrossPodHandshakeTimeout + 2*time.Second,
	}.Run(t)
	if after := restartCounts(t, victims); after != before {
		t.Errorf("victim pods: %s, then %s", before, after)
	}
}

// managerPID is a process of the manager pod's container, whose network namespace is
// the pod's.
func managerPID(t *testing.T) int {
	t.Helper()
	pods, err := cluster.client.CoreV1().Pods(managerNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && p.DeletionTimestamp == nil {
				if pid := containerPID(t, cs.ContainerID[strings.Index(cs.ContainerID, "://")+3:]); pid != 0 {
					return pid
				}
			}
		}
	}
	t.Fatal("no running manager container")
	return 0
}

// dialFromNetns dials addr from the network namespace of process pid. Each dial moves
// its thread there and back: a thread must not end in another namespace, since the
// node's processes were started with Pdeathsig, which the kernel sends when the thread
// that started them ends. A thread that cannot return stays parked for the test's life.
func dialFromNetns(pid int, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer home.Close()
		c, err := dialInNetns(pid, addr)
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{c, err}
			select {} // in the pod's namespace for good: never run anything else
		}
		runtime.UnlockOSThread()
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialInNetns moves the calling thread (locked) into pid's network namespace and dials.
func dialInNetns(pid int, addr string) (net.Conn, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("setns: %w", err)
	}
	return net.DialTimeout("tcp", addr, 5*time.Second)
}

// restartCounts names each pod's UID and its containers' restarts, init containers
// included: a replaced pod or a restart changes it.
func restartCounts(t *testing.T, pods []corev1.Pod) string {
	t.Helper()
	var parts []string
	for _, p := range pods {
		cur, err := cluster.client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := int32(0)
		for _, s := range append(cur.Status.InitContainerStatuses, cur.Status.ContainerStatuses...) {
			n += s.RestartCount
		}
		parts = append(parts, fmt.Sprintf("%s uid %s restarts %d", p.Name, cur.UID, n))
	}
	return strings.Join(parts, ", ")
}
