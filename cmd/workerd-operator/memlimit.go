package main

import (
	"os"
	"runtime/debug"
	"strconv"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// memoryLimit is the Go memory limit for a container limit given in
// podcontract.MemoryLimitEnv: 90% of it (the rest is stacks, the runtime and the
// kernel's own accounting). 0 when GOMEMLIMIT is set (the runtime already obeys it) or
// the variable is missing, malformed or not a limit.
func memoryLimit(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	n, err := strconv.ParseInt(getenv(podcontract.MemoryLimitEnv), 10, 64)
	if err != nil || n <= 0 || n == 1<<63-1 {
		return 0
	}
	return n / 10 * 9
}

// applyMemoryLimit sets the Go memory limit from the container's (see
// memoryLimit) and returns it, 0 when it left it alone.
func applyMemoryLimit() int64 {
	n := memoryLimit(os.Getenv)
	if n > 0 {
		debug.SetMemoryLimit(n)
	}
	return n
}
