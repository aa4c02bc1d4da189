package channels_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkSideBySide: the durable channels beside what a user would pick instead, Redis
// pub/sub (Debian's redis-server, started here on loopback; go-redis client), in one run
// with the same shape: one publisher awaiting each publish, 1/16/256 subscribers, 64-byte
// messages, modes as in BenchmarkRawPublishReceive; then through workerd at 16 subscribers
// (server-sent events or WebSockets to the subscribers; the publisher one request per
// publish or one WebSocket).
//
//	go test ./internal/sidecar/channels/ -run '^$' -bench SideBySide -benchtime=300x
func BenchmarkSideBySide(b *testing.B) {
	addr := startRedis(b)
	for _, subs := range benchSubscribers {
		for _, mode := range benchModes {
			paced := mode == "latency"
			b.Run(fmt.Sprintf("path=redis/mode=%s/subscribers=%d", mode, subs), func(b *testing.B) { benchRedis(b, addr, subs, paced) })
			b.Run(fmt.Sprintf("path=raw/mode=%s/subscribers=%d", mode, subs), func(b *testing.B) { benchRaw(b, subs, paced) })
			b.Run(fmt.Sprintf("path=raw-stream/mode=%s/subscribers=%d", mode, subs), func(b *testing.B) { benchRawWith(b, subs, paced, "stream", false) })
			b.Run(fmt.Sprintf("path=raw-pipe/mode=%s/subscribers=%d", mode, subs), func(b *testing.B) { benchRawWith(b, subs, paced, "stream", true) })
			b.Run(fmt.Sprintf("path=raw-streams/mode=%s/subscribers=%d", mode, subs), func(b *testing.B) { benchRawWith(b, subs, paced, "streams", true) })
		}
	}
	for _, mode := range benchModes {
		b.Run(fmt.Sprintf("path=workerd/mode=%s/subscribers=16", mode), func(b *testing.B) { benchWorkerd(b, 16, mode == "latency") })
		b.Run(fmt.Sprintf("path=workerd-messages/mode=%s/subscribers=16", mode), func(b *testing.B) { benchWorkerdWith(b, 16, mode == "latency", "&iterate") })
		b.Run(fmt.Sprintf("path=workerd-sockets/mode=%s/subscribers=16", mode), func(b *testing.B) { benchWorkerdSockets(b, 16, mode == "latency", false) })
		b.Run(fmt.Sprintf("path=workerd-sockets-pub/mode=%s/subscribers=16", mode), func(b *testing.B) { benchWorkerdSockets(b, 16, mode == "latency", true) })
	}
}

// startRedis runs redis-server on a free loopback port without persistence; skips when
// Debian's redis-server is not installed (apt-get install redis-server).
func startRedis(b *testing.B) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server not installed (apt-get install redis-server)")
	}
	addr := freeAddr(b)
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin, "--bind", host, "--port", port, "--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i == 100 {
			b.Fatalf("redis-server on %s did not answer PING", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

// benchRedis: subs subscribers (one connection each, ReceiveMessage loop), one publisher.
func benchRedis(b *testing.B, addr string, subs int, paced bool) {
	ctx := context.Background()
	pub := redis.NewClient(&redis.Options{Addr: addr})
	defer pub.Close()
	subc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: subs + 1})
	defer subc.Close()
	var lat latencies
	var wg sync.WaitGroup
	got := make(chan struct{}, 2*subs)
	for i := 0; i < subs; i++ {
		ps := subc.Subscribe(ctx, "c")
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ps.Close()
			for {
				m, err := ps.ReceiveMessage(ctx)
				if err != nil || m.Payload == "done" {
					return
				}
				lat.received(m.Payload, paced, got)
			}
		}()
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if n, err := pub.Publish(ctx, "c", benchMessage()).Result(); err != nil || n != int64(subs) {
			b.Fatalf("publish reached %d (%v), want %d", n, err, subs)
		}
		for j := 0; paced && j < subs; j++ {
			<-got
		}
	}
	pub.Publish(ctx, "c", "done")
	wg.Wait()
	lat.report(b, time.Since(start), b.N)
}
