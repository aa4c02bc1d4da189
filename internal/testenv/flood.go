package testenv

import (
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FloodRate is the connections a second the flood tests open: 20,000 in 20 s.
const FloodRate = 1000

// Flood opens n connections with dial, 64 at a time and at most perSecond a second,
// and returns how many connected and those the server had not closed when checked (a
// server shedding past its caps closes them at once). The closed ones are let go as it
// goes, so a flood holds few descriptors whatever n is. The rate keeps an attacker on
// the victim's own cores from measuring only their contention.
func Flood(dial func() (net.Conn, error), n, perSecond int) (opened int, held []net.Conn) {
	const chunk = 500
	begin := time.Now()
	for start := 0; start < n; start += chunk {
		if ahead := time.Duration(start) * time.Second / time.Duration(perSecond); time.Since(begin) < ahead {
			time.Sleep(ahead - time.Since(begin))
		}
		out := make([]net.Conn, min(chunk, n-start))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(out)); i = next.Add(1) - 1 {
					if c, err := dial(); err == nil {
						out[i] = c
					}
				}
			}()
		}
		wg.Wait()
		out = slices.DeleteFunc(out, func(c net.Conn) bool { return c == nil })
		opened += len(out)
		held = append(held, StillOpen(out)...)
	}
	return opened, held
}

// StillOpen returns the connections the server has not closed (a short read times
// out) and closes the others.
func StillOpen(conns []net.Conn) []net.Conn {
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

// CloseAll closes every connection.
func CloseAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// P99 is the nearest-rank 99th percentile of d (0 without samples).
func P99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// TimeUntil times GETs made with get one after another until done is closed, and at
// least n of them.
func TimeUntil(get func() error, n int, done <-chan struct{}) ([]time.Duration, []error) {
	var out []time.Duration
	var errs []error
	for i := 0; ; i++ {
		if i >= n {
			select {
			case <-done:
				return out, errs
			default:
			}
		}
		start := time.Now()
		if err := get(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, time.Since(start))
	}
}

// IdleFlood is an idle-connection flood: connections that never start a TLS handshake, to
// every target from one source, while the victim's Service is called.
type IdleFlood struct {
	Targets   []string
	PerTarget int
	// Dial opens one connection to addr from the attacker's address.
	Dial func(addr string) (net.Conn, error)
	// Call is one call of the victim's Service; it is timed.
	Call func() error
	// Wait is how long after the flood no connection may be open any more (the
	// server's handshake timeout and a margin).
	Wait time.Duration
}

// Run times 200 calls, floods the targets at FloodRate while timing calls until it
// ends, waits Wait and reports on t what breaks: a failed call, a connection still
// open, or fewer than half of the connections opened (no flood happened). The p99 of
// the calls, unattacked and attacked, is logged, not asserted: timings are the
// benchmarks' to judge (docs/security.md has the figures).
func (f IdleFlood) Run(t testing.TB) {
	t.Helper()
	base, errs := TimeUntil(f.Call, 200, closed)
	opened, held := 0, []net.Conn(nil)
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for _, addr := range f.Targets {
			n, open := Flood(func() (net.Conn, error) { return f.Dial(addr) }, f.PerTarget, FloodRate)
			opened += n
			held = append(held, open...)
		}
	}()
	attacked, attackedErrs := TimeUntil(f.Call, 200, flooding)
	<-flooding
	t.Cleanup(func() { CloseAll(held) })
	for _, err := range append(errs, attackedErrs...) {
		t.Errorf("call of the victim: %v", err)
	}
	time.Sleep(f.Wait)
	open := len(StillOpen(held))
	t.Logf("flood: %d connections opened to %v at %d/s; %d still open after %s", opened, f.Targets, FloodRate, open, f.Wait)
	if want := len(f.Targets) * f.PerTarget; opened < want/2 {
		t.Errorf("only %d of %d connections were opened: no flood happened", opened, want)
	}
	if open > 0 {
		t.Errorf("%d idle connections without a handshake outlived %s", open, f.Wait)
	}
	p99Base, p99Attacked := P99(base), P99(attacked)
	t.Logf("call p99: unattacked %s, attacked %s (×%.2f)", p99Base, p99Attacked, float64(p99Attacked)/float64(max(p99Base, 1)))
}

// closed is a closed channel: TimeUntil then makes exactly n calls.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
