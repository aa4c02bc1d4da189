package channels_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// 100,000 subscribes to as many objects, none unsubscribed: the registries of objects
// whose subscriptions all lapsed are freed, at most MaxObjects live at once, and once
// every lease has lapsed the heap is back near where it started.
func TestIdleRegistriesFreed(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 subscribes")
	}
	const lease = 200 * time.Millisecond
	m, err := channels.NewManager(channels.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := liveHeap()
	refused, peak := 0, int64(0)
	for i := 0; i < 100_000; i++ {
		k := channels.Key{Namespace: "ns", Object: "object-" + strconv.Itoa(i)}
		_, err := m.Subscribe(k, "room")
		for channels.CodeOf(err) == channels.CodeObjectLimit {
			refused++
			time.Sleep(lease)
			_, err = m.Subscribe(k, "room")
		}
		if err != nil {
			t.Fatalf("subscribe %d: %v", i, err)
		}
		if i%10_000 == 9_999 {
			peak = max(peak, liveHeap()-base)
		}
	}
	// Each live registry holds one subscription: a registry, a channel, a reader and
	// their map entries, well under 2 KiB.
	const perObject = 2 << 10
	if bound := int64(channels.DefaultMaxObjects) * perObject; peak > bound {
		t.Errorf("live heap grew %d bytes while subscribing, over %d (MaxObjects %d × %d)", peak, bound, channels.DefaultMaxObjects, perObject)
	}
	time.Sleep(3 * lease) // every lease lapses; the collector runs every lease/2
	grown := liveHeap() - base
	t.Logf("100,000 subscribes: %d refused at the object cap, peak +%d KiB, after the leases +%d KiB", refused, peak>>10, grown>>10)
	if grown > 256<<10 {
		t.Fatalf("live heap +%d KiB after every lease lapsed, want under 256 KiB (idle registries freed)", grown>>10)
	}
	if n := m.Objects(); n != 0 {
		t.Fatalf("%d registries left after every lease lapsed, want 0", n)
	}
}
