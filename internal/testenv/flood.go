package testenv

import (
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
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
