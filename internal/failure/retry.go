package failure

import (
	"context"
	"fmt"
	"time"
)

// Backoff is the delay before retry number n (n ≥ 1, the first retry is 1):
// base·2^(n-1), capped at max. No jitter, so callers and tests can reason about it.
func Backoff(n int, base, max time.Duration) time.Duration {
	if n < 1 || base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	if d > max {
		return max
	}
	return d
}

// RetryPolicy bounds Retry. The zero value is not valid; DefaultRetryPolicy is.
type RetryPolicy struct {
	// Attempts is the total number of calls, ≥ 1 (1 = no retry).
	Attempts int
	// Base is the first retry's delay; later ones double (Backoff). ≥ 0.
	Base time.Duration
	// Max caps a single delay. ≥ Base.
	Max time.Duration
}

// DefaultRetryPolicy: 3 attempts, 100 ms then 200 ms — the callWithRetry of @nimbus-sh/platform
// (attempts = 3, 100·2^n ms) with a 10 s cap.
var DefaultRetryPolicy = RetryPolicy{Attempts: 3, Base: 100 * time.Millisecond, Max: 10 * time.Second}

// Validate reports the first invalid field of p, naming it and its limit.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Attempts < 1:
		return fmt.Errorf("failure: RetryPolicy.Attempts is %d, must be ≥ 1 (1 = no retry)", p.Attempts)
	case p.Base < 0:
		return fmt.Errorf("failure: RetryPolicy.Base is %v, must be ≥ 0", p.Base)
	case p.Max < p.Base:
		return fmt.Errorf("failure: RetryPolicy.Max is %v, must be ≥ Base (%v)", p.Max, p.Base)
	}
	return nil
}

// Retry calls fn until it succeeds, its error's class (ClassifyCall) is not retryable
// (IsRetryable: overloaded and permanent never are), p.Attempts calls were made, or ctx
// ends; between calls it waits Backoff(n, p.Base, p.Max). fn must mint a fresh stub or
// connection itself: a stub that failed once is spent. It returns nil, fn's
// last error unchanged (classify it again with ClassifyCall), ctx's error while
// waiting, or p's validation error. The number of calls made is returned too.
func Retry(ctx context.Context, p RetryPolicy, fn func(context.Context) error) (calls int, err error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	for n := 1; ; n++ {
		err = fn(ctx)
		calls = n
		if err == nil || n >= p.Attempts || !IsRetryable(ClassifyCall(err)) {
			return calls, err
		}
		t := time.NewTimer(Backoff(n, p.Base, p.Max))
		select {
		case <-ctx.Done():
			t.Stop()
			return calls, ctx.Err()
		case <-t.C:
		}
	}
}
