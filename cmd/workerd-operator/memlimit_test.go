package main

import (
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

func TestSidecarMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
	}{
		{map[string]string{podcontract.MemoryLimitEnv: "268435456"}, 241591905},
		{map[string]string{podcontract.MemoryLimitEnv: "268435456", "GOMEMLIMIT": "100MiB"}, 0},
		{map[string]string{podcontract.MemoryLimitEnv: "256Mi"}, 0},
		{map[string]string{}, 0},
	} {
		if got := memoryLimit(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.env, got, tc.want)
		}
	}
}
