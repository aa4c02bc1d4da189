package channels_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// fakeClock is a manual clock for the lease: the collector and subscribe read it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// The lease, deterministically: leaked subscriptions hold the quota until the lease lapses,
// a wait renews it, and a pending wait holds it.
func TestManagerLease(t *testing.T) {
	spec := readSpec(t)
	clock := &fakeClock{now: time.Unix(0, 0)}
	const lease = time.Minute
	m, err := channels.NewManager(channels.Options{Lease: lease, Now: clock.Now, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k := channels.Key{Namespace: "ns", Object: "obj"}
	handles := make([]string, spec.channels)
	for i := range handles {
		if handles[i], err = m.Subscribe(k, "c"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Subscribe(k, "extra"); channels.CodeOf(err) != channels.CodeChannelLimit {
		t.Fatalf("channel %d within the lease: %v, want CHANNEL_LIMIT", spec.channels+1, err)
	}
	clock.Add(lease / 2)
	if _, err := m.Wait(context.Background(), k, handles[0], 0); err != nil { // renews c0
		t.Fatal(err)
	}
	clock.Add(lease/2 + time.Second)
	if _, err := m.Subscribe(k, "extra"); err != nil {
		t.Fatalf("after the lease: %v, want success", err)
	}
	if n, _ := m.SubscriberCount(k, "c0"); n != 1 {
		t.Fatalf("c0 renewed by its wait: count %d, want 1", n)
	}
	if n, _ := m.SubscriberCount(k, "c1"); n != 0 {
		t.Fatalf("c1 leaked: count %d, want 0", n)
	}
	if _, err := m.Wait(context.Background(), k, handles[1], 0); channels.CodeOf(err) != channels.CodeSubscriptionGone {
		t.Fatalf("wait on a collected subscription: %v, want SUBSCRIPTION_GONE", err)
	}
}

// Limits outside the seed's ceilings are refused, naming the limit and the source.
func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*channels.Limits)
		ok   bool
	}{
		{"defaults", func(*channels.Limits) {}, true},
		{"lowered", func(l *channels.Limits) { l.MaxChannels = 8; l.MaxBacklogBytes = 4096 }, true},
		{"channels above 64", func(l *channels.Limits) { l.MaxChannels = 65 }, false},
		{"subscribers above 256", func(l *channels.Limits) { l.MaxSubscribers = 257 }, false},
		{"message above 64 KiB", func(l *channels.Limits) { l.MaxMessageBytes = 64<<10 + 1 }, false},
		{"backlog below 1024", func(l *channels.Limits) { l.MaxBacklogBytes = 1000 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := channels.DefaultLimits()
			tc.mod(&l)
			err := l.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	spec, d := readSpec(t), channels.DefaultLimits()
	if d.MaxChannels != spec.channels || d.MaxSubscribers != spec.subscribers || d.MaxMessageBytes != spec.messageBytes || d.MaxBacklogBytes != spec.backlogBytes {
		t.Fatalf("DefaultLimits %+v differ from DESIGN.md §6 %+v", d, spec)
	}
	if got, want := channels.BacklogReason(channels.DefaultLimits().MaxBacklogBytes), readSpec(t).backlogReason; got != want {
		t.Fatalf("BacklogReason = %q, want %q (DESIGN.md §6)", got, want)
	}
}
