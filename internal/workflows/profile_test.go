package workflows_test

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// profileEnv names a directory: a child sidecar started with it set records its CPU
// profile between SIGUSR1 and SIGUSR2 and then writes cpu.pprof, block.pprof and
// mutex.pprof there (BenchmarkEngines with WF_BENCH_PROFILE).
const profileEnv = "WF_BENCH_PROFILE"

// profileChild arms the signals in a child sidecar when profileEnv is set.
func profileChild() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return
	}
	runtime.SetBlockProfileRate(10_000) // one sample per 10 µs blocked
	runtime.SetMutexProfileFraction(5)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var cpu *os.File
		for s := range sig {
			if s == syscall.SIGUSR1 && cpu == nil {
				cpu, _ = os.Create(filepath.Join(dir, "cpu.pprof"))
				_ = pprof.StartCPUProfile(cpu)
				continue
			}
			if s != syscall.SIGUSR2 || cpu == nil {
				continue
			}
			pprof.StopCPUProfile()
			cpu.Close()
			for _, name := range []string{"block", "mutex"} {
				if f, err := os.Create(filepath.Join(dir, name+".pprof")); err == nil {
					_ = pprof.Lookup(name).WriteTo(f, 0)
					f.Close()
				}
			}
			_ = os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
			cpu = nil
		}
	}()
}

// profiling brackets one measured run of the sidecar engine: it starts the child's CPU
// profile (when WF_BENCH_PROFILE is set) and returns the function that ends the run,
// collects the profiles and logs the CPU seconds each process spent in the run.
func (h *harness) profiling(b *testing.B) func() {
	h.mu.Lock()
	sc, wd := h.sidecar, h.workerd
	h.mu.Unlock()
	dir := os.Getenv(profileEnv)
	if dir != "" {
		_ = os.Remove(filepath.Join(dir, "done"))
		_ = sc.cmd.Process.Signal(syscall.SIGUSR1)
	}
	cs, cw := cpuSeconds(sc.cmd.Process.Pid), cpuSeconds(wd.cmd.Process.Pid)
	return func() {
		b.Logf("CPU seconds in the run: sidecar %.2f, workerd %.2f",
			cpuSeconds(sc.cmd.Process.Pid)-cs, cpuSeconds(wd.cmd.Process.Pid)-cw)
		if dir == "" {
			return
		}
		_ = sc.cmd.Process.Signal(syscall.SIGUSR2)
		for range 500 {
			if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Logf("the sidecar wrote no profile to %s", dir)
	}
}

// cpuSeconds is the user + system CPU time of process pid (/proc/<pid>/stat).
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}
