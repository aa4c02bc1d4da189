package failure

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

type retryScenario struct {
	Name     string     `json:"name"`
	Source   string     `json:"source"`
	Attempts int        `json:"attempts"`
	Errors   []*JSError `json:"errors"`
	Want     retryOut   `json:"want"`
}

type retryOut struct {
	Name  string `json:"name,omitempty"`
	Calls int    `json:"calls"`
	OK    bool   `json:"ok"`
}

func loadRetries(t *testing.T) []retryScenario {
	t.Helper()
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Retries []retryScenario `json:"retries"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Retries) == 0 {
		t.Fatalf("%s: no retries", vectorFile)
	}
	return doc.Retries
}

// goRetry runs one scenario through Retry with no delay.
func goRetry(t *testing.T, r retryScenario) retryOut {
	t.Helper()
	n := 0
	calls, err := Retry(context.Background(), RetryPolicy{Attempts: r.Attempts}, func(context.Context) error {
		n++
		if n <= len(r.Errors) {
			return r.Errors[n-1]
		}
		return nil
	})
	if calls != n {
		t.Fatalf("Retry reported %d calls, fn saw %d", calls, n)
	}
	return retryOut{Name: r.Name, Calls: calls, OK: err == nil}
}

func TestRetryScenariosGo(t *testing.T) {
	for _, r := range loadRetries(t) {
		t.Run(r.Name, func(t *testing.T) {
			got, want := goRetry(t, r), r.Want
			want.Name = r.Name
			if got != want {
				t.Errorf("source %s: got %+v, want %+v", r.Source, got, want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		n         int
		base, max time.Duration
		want      time.Duration
	}{
		{1, 100 * ms, 10 * time.Second, 100 * ms}, // seed 003: 100·2^n ms
		{2, 100 * ms, 10 * time.Second, 200 * ms},
		{3, 100 * ms, 250 * ms, 250 * ms},
		{60, 100 * ms, 10 * time.Second, 10 * time.Second},
		{0, 100 * ms, time.Second, 0},
		{1, 0, 0, 0},
	} {
		if got := Backoff(tc.n, tc.base, tc.max); got != tc.want {
			t.Errorf("Backoff(%d, %v, %v) = %v, want %v", tc.n, tc.base, tc.max, got, tc.want)
		}
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	if err := DefaultRetryPolicy.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p     RetryPolicy
		field string
	}{
		{RetryPolicy{Attempts: 0}, "Attempts"},
		{RetryPolicy{Attempts: 1, Base: -1}, "Base"},
		{RetryPolicy{Attempts: 1, Base: time.Second, Max: time.Millisecond}, "Max"},
	} {
		_, err := Retry(context.Background(), tc.p, func(context.Context) error { t.Fatal("fn called"); return nil })
		if err == nil || !strings.Contains(err.Error(), "RetryPolicy."+tc.field) {
			t.Errorf("%+v: error %v does not name %s", tc.p, err, tc.field)
		}
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls, err := Retry(ctx, RetryPolicy{Attempts: 5, Base: time.Hour, Max: time.Hour}, func(context.Context) error {
		cancel()
		return &JSError{Message: "Network connection lost.", IsRetryable: true}
	})
	if calls != 1 || err != context.Canceled {
		t.Errorf("calls %d err %v, want 1 and context.Canceled", calls, err)
	}
}
