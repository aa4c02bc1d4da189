package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
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
	var attacked []time.Duration
	done := make(chan struct{})
	go func() { defer close(done); attacked = latencies(t, url, 200) }()
	for _, addr := range targets {
		n, open := flood(src, addr, floodPerPort())
		opened += n
		held = append(held, open...)
	}
	<-done
	t.Cleanup(func() { closeConns(held) })
	time.Sleep(sidecar.DefaultCrossPodHandshakeTimeout + 2*time.Second)
	open := len(stillOpen(held))
	t.Logf("flood: %d connections from %s opened to %v; %d still open after %s", opened, src, targets, open, sidecar.DefaultCrossPodHandshakeTimeout+2*time.Second)
	if open > 0 {
		t.Errorf("%d idle connections without a handshake outlived the handshake timeout", open)
	}
	p99Base, p99Attacked := p99(base), p99(attacked)
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

// flood opens n connections from src to addr, 64 at a time, and returns how many
// connected and those the server had not closed when checked (a relay closes the ones
// past its caps at once). Closed ones are let go as it goes, so the test holds few
// descriptors whatever n is.
func flood(src net.IP, addr string, n int) (int, []net.Conn) {
	const chunk = 1000
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	opened := 0
	var held []net.Conn
	for start := 0; start < n; start += chunk {
		out := make([]net.Conn, min(chunk, n-start))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(out)); i = next.Add(1) - 1 {
					if c, err := d.Dial("tcp", addr); err == nil {
						out[i] = c
					}
				}
			}()
		}
		wg.Wait()
		out = slices.DeleteFunc(out, func(c net.Conn) bool { return c == nil })
		opened += len(out)
		held = append(held, stillOpen(out)...)
	}
	return opened, held
}

// stillOpen returns the connections the server has not closed (a short read times
// out) and closes the others.
func stillOpen(conns []net.Conn) []net.Conn {
	open := make([]bool, len(conns))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i, c := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			open[i] = err == nil || (errors.As(err, &ne) && ne.Timeout())
		}()
	}
	wg.Wait()
	var out []net.Conn
	for i, c := range conns {
		if open[i] {
			out = append(out, c)
		} else {
			_ = c.Close()
		}
	}
	return out
}

func closeConns(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
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

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1] // nearest rank
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
