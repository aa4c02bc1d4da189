package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// newWSRoom creates the Worker wsroom (2 replicas, the room module testenv.WSRoomModule)
// binding ROOMS to the DurableObjectNamespace wsrooms (class Room, 2 shards), and the
// Worker wsfront whose service binding ROOMS_SVC reaches wsroom; it returns the
// "host:port" of each wsroom pod's http socket once all three are Ready.
func newWSRoom(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	js, err := os.ReadFile(filepath.Join(repoRoot, testenv.WSRoomModule))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, "wsroom", "", 2)
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(string(js))
	w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "ROOMS", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "wsrooms"}}}
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	d := &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "wsrooms"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{
			WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "wsroom"}, ClassName: "Room", SQL: true,
			Shards:  ptr.To[int32](2),
			Storage: &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimDelete},
		},
	}
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), d) })
	front := newWorker(t, "wsfront", "", 1)
	patch = client.MergeFrom(front.DeepCopy())
	front.Spec.Source.Inline.Modules[0].Content = ptr.To(`export default { fetch(req, env) { return env.ROOMS_SVC.fetch(req); } };`)
	front.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "ROOMS_SVC", Service: &fleetv1alpha1.ServiceBinding{Name: "wsroom"}}}
	if err := k8sClient.Patch(ctx, front, patch); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d, 4*time.Minute)
	waitReady(t, w, 4*time.Minute)
	waitReady(t, front, 4*time.Minute)
	var bases []string
	for _, p := range workerPods(t, "wsroom") {
		bases = append(bases, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(podcontract.DefaultHTTPPort)))
	}
	if len(bases) != 2 {
		t.Fatalf("%d wsroom pods, want 2", len(bases))
	}
	return bases
}

// roomShard is the shard of room name: the Go jump hash of the id the Worker mints.
func roomShard(t *testing.T, base, name string) int32 {
	t.Helper()
	id, err := get("http://" + base + "/id?name=" + name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := render.ShardFor(id, 2)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDurableObjectWebSockets: WebSockets from clients through either Worker pod, its
// router and the owning shard's gateway (mutual TLS) to Durable Objects on 2 shards
// (docs/durable-objects.md "WebSockets"): 200 clients in 20 rooms get every broadcast of
// their room once, in order; the objects hibernate with sockets open; a Worker reaches
// the rooms through a service binding; stub.connect() reaches rooms on both shards;
// deleting a shard pod closes its sockets with
// 1012 within its grace period, and clients reconnect to the room's stored state.
func TestDurableObjectWebSockets(t *testing.T) {
	bases := newWSRoom(t)
	// The shards may still be rolling from their first renders: a client of a shard
	// being replaced is refused, and that is not what this test is about.
	eventually(t, 4*time.Minute, "the wsrooms shards settled", func() error {
		return statefulSetRolled(context.Background(), render.ShardSetName("wsrooms"), 0)
	})
	t.Run("200 clients in 20 rooms", func(t *testing.T) {
		const rooms, clients, each = 20, 10, 2
		conns := make([][]*websocket.Conn, rooms)
		perShard := map[int32]int{}
		for r := range conns {
			room := fmt.Sprintf("room-%d", r)
			perShard[roomShard(t, bases[0], room)]++
			for i := 0; i < clients; i++ {
				ws := testenv.DialRoom(t, bases[i%2], room, fmt.Sprintf("u%d", i), "")
				if got := testenv.RoundTrip(t, ws, "echo:ready"); got != "ready" {
					t.Fatalf("room %d client %d: %q", r, i, got)
				}
				conns[r] = append(conns[r], ws)
			}
		}
		if perShard[0] == 0 || perShard[1] == 0 {
			t.Fatalf("rooms per shard %v: want both shards", perShard)
		}
		testenv.CheckRoomBroadcasts(t, conns, each)
		t.Logf("rooms per shard %v", perShard)
	})
	t.Run("hibernation", func(t *testing.T) {
		testenv.CheckRoomHibernation(t, testenv.DialRoom(t, bases[0], "hib", "ada", ""), testenv.DialRoom(t, bases[1], "hib", "bob", ""))
	})
	t.Run("through a service binding", func(t *testing.T) {
		front := strings.TrimPrefix(serviceURL(t, "wsfront"), "http://")
		ws := testenv.DialRoom(t, front, "via-front", "ada", "")
		if got := testenv.RoundTrip(t, ws, "echo:through wsfront"); got != "through wsfront" {
			t.Errorf("echo through the service binding: %q", got)
		}
	})
	t.Run("stub.connect()", func(t *testing.T) {
		for _, name := range []string{"room-0", "room-1", "room-2", "room-3"} {
			want := fmt.Sprintf("%s:hello from %s", name, bases[0])
			got, err := get("http://" + bases[0] + "/tcp?name=" + name + "&say=hello+from+" + bases[0])
			if err != nil || got != want {
				t.Errorf("connect() to %s (shard %d): %q %v, want %q", name, roomShard(t, bases[0], name), got, err, want)
			}
		}
	})
	t.Run("shard pod replaced", func(t *testing.T) { wsShardReplaced(t, bases) })
}

// wsShardReplaced: clients of a room on shard 1 through both Worker pods; the shard pod
// is deleted: each client gets close 1012 (service restart) with a reason within the
// pod's grace period (its preStop drain closes them); a client reconnecting through the
// Worker reaches the replacement pod and the room's stored state.
func wsShardReplaced(t *testing.T, bases []string) {
	ctx := context.Background()
	room := ""
	for i := 0; room == ""; i++ {
		if n := fmt.Sprintf("moving-%d", i); roomShard(t, bases[0], n) == 1 {
			room = n
		}
	}
	clients := []*websocket.Conn{testenv.DialRoom(t, bases[0], room, "ada", ""), testenv.DialRoom(t, bases[1], room, "bob", "")}
	testenv.RoundTrip(t, clients[0], "echo:joined")
	if got := testenv.RoundTrip(t, clients[1], "bcast:before the restart"); !strings.Contains(got, "before the restart") {
		t.Fatalf("broadcast: %q", got)
	}
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: "wsrooms-do-1"}, pod); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	deadline := time.Now().Add(grace)
	if err := k8sClient.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for i, ws := range clients {
		_ = ws.SetReadDeadline(deadline)
		var err error
		for err == nil { // ada may still hold bob's broadcast
			_, _, err = ws.ReadMessage()
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || !strings.Contains(ce.Text, "wsrooms-do-1 is being replaced") {
			t.Errorf("client %d: %v, want close 1012 with a reason within the grace period (%s)", i, err, grace)
		}
	}
	var info testenv.RoomInfo
	eventually(t, 4*time.Minute, "a reconnect to the replacement", func() error {
		ws, err := testenv.TryDialRoom(bases[0], room, "ada", "")
		if err != nil {
			return err
		}
		defer ws.Close()
		info = testenv.Info(t, ws)
		return nil
	})
	if info.Seq != 1 {
		t.Errorf("after the replacement the room's seq is %d, want 1 (stored before)", info.Seq)
	}
}

// TestPartyServerRoom: a room written with partyserver (npm; the library of Cloudflare's
// chat and game templates, hibernating), built as import expects (`wrangler deploy
// --dry-run --outdir`) and imported, greets, echoes and broadcasts through the product.
// https://github.com/cloudflare/partykit/tree/main/packages/partyserver
func TestPartyServerRoom(t *testing.T) {
	project, bundle := buildProject(t, filepath.Join(repoRoot, "test", "e2e", "testdata", "partyroom"))
	res := importAndApply(t, project, bundle)
	base := strings.Replace(serviceURL(t, res.Worker.Name), "http://", "ws://", 1) + "/parties/chat/lobby"
	var conns []*websocket.Conn
	for _, id := range []string{"ada", "bob"} {
		var ws *websocket.Conn
		eventually(t, time.Minute, "connect "+id, func() (err error) {
			ws, _, err = websocket.DefaultDialer.Dial(base+"?_pk="+id, nil)
			return err
		})
		t.Cleanup(func() { _ = ws.Close() })
		if got := readText(t, ws); got != "welcome to lobby" {
			t.Fatalf("%s: first message %q, want the room's greeting", id, got)
		}
		conns = append(conns, ws)
	}
	if got := testenv.RoundTrip(t, conns[0], "echo:hi"); got != "hi" {
		t.Errorf("echo: %q", got)
	}
	if err := conns[1].WriteMessage(websocket.TextMessage, []byte("hello room")); err != nil {
		t.Fatal(err)
	}
	for i, ws := range conns {
		if got := readText(t, ws); got != "bob: hello room" {
			t.Errorf("client %d: broadcast %q, want %q", i, got, "bob: hello room")
		}
	}
}

func readText(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
