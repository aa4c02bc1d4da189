package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// HoldMachine takes the machine for a suite whose tests depend on having its CPUs: the
// cluster suites (test/e2e, test/realnode) move shards under load, autoscale on CPU
// and drain nodes, and `go test ./...` would otherwise run them at the same time on
// a 2-core machine, each starving the other's probes and deadlines. It blocks while
// another suite holds it (a flock on a file of the cache directory, released when
// the process exits, however it exits) and says so; release gives it back.
func HoldMachine(suite string) (release func(), err error) {
	dir := toolchain.CacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "cluster-suite.lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(name)
		fmt.Fprintf(os.Stderr, "%s: waiting for %s to finish (%s): the cluster suites run one at a time\n", suite, strings.TrimSpace(string(holder)), name)
		start := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%s: waited %s\n", suite, time.Since(start).Round(time.Second))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%s (pid %d)\n", suite, os.Getpid())), 0)
	return func() { f.Close() }, nil
}
