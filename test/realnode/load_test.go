package realnode

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// load is clients requesting a URL until stopped.
type load struct {
	ok, failed atomic.Int64
	slowest    atomic.Int64 // nanoseconds, of an answered request
	mu         sync.Mutex
	failures   []string
	done       chan struct{}
	wg         sync.WaitGroup
	once       sync.Once
}

// startLoad runs clients that each request url with c, pausing pause between requests.
func startLoad(c *http.Client, url string, clients int, pause time.Duration) *load {
	l := &load{done: make(chan struct{})}
	for range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.done:
					return
				case <-time.After(pause):
				}
				t0 := time.Now()
				_, err := getWith(c, url)
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 10 {
						l.failures = append(l.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
					}
					l.mu.Unlock()
				} else {
					l.ok.Add(1)
					d := int64(time.Since(t0))
					for cur := l.slowest.Load(); d > cur && !l.slowest.CompareAndSwap(cur, d); cur = l.slowest.Load() {
					}
				}
			}
		}()
	}
	return l
}

// stop stops the clients and waits for them; a second call does nothing.
func (l *load) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}
