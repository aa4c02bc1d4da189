// Package realnode runs the operator on a real Kubernetes node: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd with runc, a kubelet and kube-proxy,
// pods in real containers from images built locally (hack/ociimage). It installs the
// install bundle and the samples and checks what the process-based dev cluster
// (internal/devcluster) cannot: security contexts, volume layouts, images, Services.
// docs/real-node.md describes it.
//
// It needs root, cgroup v1 and the binaries hack/build-node.sh builds (make tools builds
// them when run as root); otherwise every test skips and says why.
//
// Isolation: the test binary re-executes itself as the init of new PID, mount, network
// and UTS namespaces. Inside, /run, /var/lib and /var/log are directories of a temporary
// run directory, the sysctls the kubelet insists on setting are files bind-mounted over
// /proc/sys, and the network is the namespace's own (loopback, a bridge, iptables). When
// the init exits, the kernel kills every process of the namespace and the mounts,
// interfaces and iptables rules go with it. Cgroups are not namespaced: the kubelet's
// pods live under one cgroup root per run (/workerd-realnode-<pid> in every v1
// hierarchy), which the outer process removes.
package realnode

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

const (
	insideEnv    = "WORKERD_OPERATOR_REALNODE_DIR"    // set in the re-executed test binary
	cgroupEnv    = "WORKERD_OPERATOR_REALNODE_CGROUP" // the run's cgroup root
	optOutEnv    = "WORKERD_OPERATOR_REALNODE"        // "skip" skips the suite
	cgroupPrefix = "workerd-realnode-"
)

// skipReason is why the suite does not run on this machine ("" when it runs).
var skipReason string

// requireNode skips the test when the node does not run here.
func requireNode(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip("realnode: " + skipReason)
	}
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if plan := os.Getenv(memberEnv); plan != "" {
		return memberInit(plan)
	}
	if dir := os.Getenv(insideEnv); dir != "" {
		return inside(m, dir, os.Getenv(cgroupEnv))
	}
	skipReason = unsupported()
	if skipReason != "" {
		return m.Run() // every test skips with the reason
	}
	return outside()
}

// binaries the node needs, by where they come from.
type binaries struct {
	controlPlane, k8s, containerd string
	runc, cniDir, coredns         string
	metricsServer                 string
}

func findBinaries() (*binaries, error) {
	cache := toolchain.CacheDir()
	b := &binaries{
		controlPlane:  filepath.Join(cache, "k8s", "v"+podcontract.KubernetesVersion),
		k8s:           filepath.Join(cache, "k8s", "v"+podcontract.KubernetesVersion),
		containerd:    filepath.Join(cache, "containerd", "v"+containerdVersion),
		cniDir:        "/usr/lib/cni",
		coredns:       filepath.Join(cache, "coredns", "v"+corednsVersion, "coredns"),
		metricsServer: filepath.Join(cache, "metrics-server", "v"+metricsServerVersion, "metrics-server"),
	}
	var missing []string
	for _, f := range []string{
		filepath.Join(b.controlPlane, "etcd"), filepath.Join(b.controlPlane, "kube-apiserver"),
		filepath.Join(b.controlPlane, "kube-controller-manager"), filepath.Join(b.controlPlane, "kube-scheduler"),
		filepath.Join(b.k8s, "kubelet"), filepath.Join(b.k8s, "kube-proxy"),
		filepath.Join(b.containerd, "containerd"), filepath.Join(b.containerd, "containerd-shim-runc-v2"), filepath.Join(b.containerd, "ctr"),
		filepath.Join(b.cniDir, "bridge"), filepath.Join(b.cniDir, "host-local"), filepath.Join(b.cniDir, "loopback"),
		b.coredns, b.metricsServer,
	} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	for _, c := range []string{"runc", "iptables-restore", "ip"} {
		p, err := exec.LookPath(c)
		if err != nil {
			for _, d := range []string{"/usr/sbin", "/sbin"} {
				if _, e := os.Stat(filepath.Join(d, c)); e == nil {
					p, err = filepath.Join(d, c), nil
				}
			}
		}
		if err != nil {
			missing = append(missing, c)
		} else if c == "runc" {
			b.runc = p
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing %s (build them with `bash hack/build-node.sh` as root, or `make tools` as root)", strings.Join(missing, ", "))
	}
	return b, nil
}

// unsupported says why the real node cannot run here, or "".
func unsupported() string {
	if testing.Short() {
		return "skipped in -short mode"
	}
	if os.Getenv(optOutEnv) == "skip" {
		return optOutEnv + "=skip"
	}
	if os.Geteuid() != 0 {
		return "needs root (a kubelet, containerd and runc run real containers)"
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup/memory", &st); err != nil || st.Type != 0x27e0eb /* CGROUP_SUPER_MAGIC */ {
		return "needs the cgroup v1 memory hierarchy at /sys/fs/cgroup/memory (this suite configures the kubelet for cgroup v1 with cgroupfs)"
	}
	if _, err := findBinaries(); err != nil {
		return err.Error()
	}
	// Root in a container may not create namespaces (no CAP_SYS_ADMIN, seccomp).
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{Cloneflags: namespaces}
	if err := probe.Run(); err != nil {
		return fmt.Sprintf("cannot create PID, mount and network namespaces here (%v)", err)
	}
	return ""
}

// namespaces the node runs in.
const namespaces = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC

// v1Hierarchies lists the cgroup v1 hierarchies under /sys/fs/cgroup.
func v1Hierarchies() []string { return cgroupMounts("cgroup") }

// allHierarchies adds the cgroup2 mount (runc creates a container's cgroup there too
// in hybrid mode).
func allHierarchies() []string { return cgroupMounts("cgroup", "cgroup2") }

func cgroupMounts(types ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && slices.Contains(types, fields[i+1]) {
				out = append(out, fields[4])
			}
		}
	}
	return out
}

// outside runs the suite in a child test binary in new namespaces, then removes what
// the namespaces do not take with them (the run directory, the cgroup root) and checks
// nothing is left behind.
func outside() int {
	release, err := testenv.HoldMachine("test/realnode")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	defer release()
	removeStaleCgroups()
	before := hostState()
	dir, err := os.MkdirTemp("", "workerd-realnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	cg := cgroupPrefix + strconv.Itoa(os.Getpid())
	code := func() int {
		t0 := time.Now()
		if _, err := buildImages(dir); err != nil {
			fmt.Fprintln(os.Stderr, "realnode: images:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "realnode: images built in %.1fs\n", time.Since(t0).Seconds())
		if err := makeCgroupRoot(cg); err != nil {
			fmt.Fprintln(os.Stderr, "realnode: cgroup root:", err)
			return 1
		}
		cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), insideEnv+"="+dir, cgroupEnv+"=/"+cg)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: namespaces,
			Pdeathsig:  syscall.SIGKILL,
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "realnode: start the namespaced test binary:", err)
			return 1
		}
		// An interrupt reaches the child's init, which stops the node and exits.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			for s := range sigs {
				_ = cmd.Process.Signal(s)
			}
		}()
		err := cmd.Wait()
		signal.Stop(sigs)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			return 1
		}
		return 0
	}()
	// The PID namespace is gone with its init: no process of the node is left; its
	// cgroups are empty and can go.
	if err := removeCgroupRoot(cg); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: left behind:", err)
		code = 1
	}
	if after := hostState(); after != before {
		fmt.Fprintf(os.Stderr, "realnode: the machine changed during the run:\nbefore: %s\nafter:  %s\n", before, after)
		code = 1
	}
	if left := mountsUnder(dir); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "realnode: mounts left behind:", left)
		code = 1
	} else if os.Getenv("WORKERD_OPERATOR_REALNODE_KEEP") == "" {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "realnode: run directory kept:", dir)
	}
	return code
}

func makeCgroupRoot(name string) error {
	hs := v1Hierarchies()
	if len(hs) == 0 {
		return errors.New("no cgroup v1 hierarchy mounted")
	}
	for _, h := range hs {
		d := filepath.Join(h, name)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		// A new cpuset cgroup has no CPUs or memory nodes until given its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the run's cgroup tree in every hierarchy, deepest first,
// waiting a little for the killed processes to leave it.
func removeCgroupRoot(name string) error {
	var last error
	for deadline := time.Now().Add(30 * time.Second); ; {
		last = nil
		for _, h := range allHierarchies() {
			root := filepath.Join(h, name)
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					last = fmt.Errorf("cgroup %s: %w", dirs[i], err)
				}
			}
		}
		if last == nil || time.Now().After(deadline) {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// removeStaleCgroups removes cgroup roots of earlier runs whose process is gone.
func removeStaleCgroups() {
	for _, h := range allHierarchies() {
		ents, _ := os.ReadDir(h)
		for _, e := range ents {
			pid, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
			if !ok || !e.IsDir() {
				continue
			}
			if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == nil {
				continue // that run is still going
			}
			_ = removeCgroupRoot(e.Name())
		}
	}
}

// hostState sums up what the node could change on the machine outside its namespaces:
// the kubelet's sysctls, the network interfaces, the paths a kubelet and containerd
// write by default, and the iptables chains of the host's network namespace.
func hostState() string {
	var b strings.Builder
	keys := make([]string, 0, len(kubeletSysctls))
	for k := range kubeletSysctls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, _ := os.ReadFile("/proc/sys/" + k)
		fmt.Fprintf(&b, "%s=%s ", k, strings.TrimSpace(string(v)))
	}
	ifs, _ := os.ReadDir("/sys/class/net")
	for _, i := range ifs {
		b.WriteString(i.Name() + " ")
	}
	for _, p := range []string{"/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/var/log/pods", "/var/lib/cni", "/run/netns"} {
		if _, err := os.Stat(p); err == nil {
			b.WriteString(p + " ")
		}
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, ":") {
				b.WriteString(strings.Fields(l)[0] + " ")
			}
		}
	}
	return b.String()
}

func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}
