package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// More nodes join the control-plane host's node: each is the test binary re-executed
// as the init of its own PID, mount, network, UTS and IPC namespaces, with its own
// /run, /var/lib and /var/log (under <run dir>/nodes/<name>), containerd, kubelet and
// kube-proxy, and a cgroup root under the run's. The nodes' namespaces are networked
// through a bridge in the control-plane host's namespace (nodesBridge, nodesGateway):
// each node has an address on it, its pods a /24 of their own, routed through the
// node's address. Killing a node's init kills every process of its namespace at once,
// as a power cut would.
const (
	memberEnv    = "WORKERD_OPERATOR_REALNODE_MEMBER" // the joining node's plan file, in its re-executed binary
	nodesBridge  = "nodes0"
	nodesGateway = "10.250.1.1"
	nodesPrefix  = 24
)

// memberPlan is what a joining node needs from the control-plane host: its identity
// and the credentials issued for it (written by join, read by the node's init).
type memberPlan struct {
	Name, IP, PodCIDR    string
	Dir, CgroupRoot      string
	Kubelet, KubeletCert string
	KubeletKey, CA       string
	KubeProxy, ImagesDir string
	ControlPlaneIP       string
}

// member is a node that joined, seen from the control-plane host.
type member struct {
	name, ip string
	cmd      *exec.Cmd
	done     chan struct{}
	log      string
}

// memberNodes are the nodes that can join: i = 1, 2, …
func memberNode(i int) (name, ip, podCIDR string) {
	return fmt.Sprintf("realnode-%d", i+1), fmt.Sprintf("10.250.1.%d", i+1), fmt.Sprintf("10.244.%d.0/24", i)
}

// join starts node i, networks it and waits until its Node is Ready.
func (n *node) join(ctx context.Context, i int) (*member, error) {
	name, ip, cidr := memberNode(i)
	plan, err := n.planMember(name, ip, cidr)
	if err != nil {
		return nil, err
	}
	if err := ensureBridge(); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(plan)
	planFile := filepath.Join(plan.Dir, "plan.json")
	if err := os.WriteFile(planFile, b, 0o600); err != nil {
		return nil, err
	}
	m := &member{name: name, ip: ip, done: make(chan struct{}), log: filepath.Join(plan.Dir, "init.log")}
	logf, err := os.Create(m.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	m.cmd = exec.Command("/proc/self/exe", "-test.run=^$")
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.Env = append(os.Environ(), memberEnv+"="+planFile)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: namespaces, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %s: %w", name, err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	veth := "veth-" + name
	for _, args := range [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(m.cmd.Process.Pid)},
		{"link", "set", veth, "master", nodesBridge, "up"},
		{"route", "replace", cidr, "via", ip},
	} {
		if err := runIP(args...); err != nil {
			m.kill()
			return nil, err
		}
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		err := nodeReady(ctx, n.client, name)
		if err == nil {
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("node %s exited before it was Ready (%v); log:\n%s", name, err, tail(m.log, 40))
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			m.kill()
			return nil, fmt.Errorf("node %s not Ready after 4m (%v); log:\n%s", name, err, tail(m.log, 40))
		}
	}
}

// planMember makes node name's directories and issues its credentials.
func (n *node) planMember(name, ip, cidr string) (*memberPlan, error) {
	dir := filepath.Join(n.dir, "nodes", name)
	for _, d := range []string{"logs", "cni/net.d", "containerd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	m := &node{dir: dir, name: name, ip: ip, podCIDR: cidr, pki: n.pki}
	kc, crt, key, err := m.kubeletCredentials()
	if err != nil {
		return nil, err
	}
	proxy, err := n.pki.kubeconfig("kube-proxy-"+name, "https://"+nodeIP+":6443", "system:kube-proxy")
	if err != nil {
		return nil, err
	}
	cg := runCgroupRoot + "/" + name
	if err := makeCgroupRoot(cg); err != nil {
		return nil, err
	}
	return &memberPlan{Name: name, IP: ip, PodCIDR: cidr, Dir: dir, CgroupRoot: cg,
		Kubelet: kc, KubeletCert: crt, KubeletKey: key, CA: n.pki.CA, KubeProxy: proxy,
		ImagesDir: filepath.Join(n.dir, "images"), ControlPlaneIP: nodeIP}, nil
}

// ensureBridge creates the bridge the nodes' namespaces hang off, once.
func ensureBridge() error {
	if _, err := net.InterfaceByName(nodesBridge); err == nil {
		return nil
	}
	for _, args := range [][]string{
		{"link", "add", nodesBridge, "type", "bridge"},
		{"addr", "add", nodesGateway + "/" + strconv.Itoa(nodesPrefix), "dev", nodesBridge},
		{"link", "set", nodesBridge, "up"},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	return nil
}

// kill is a power cut: the node's init dies and the kernel kills every process of its
// PID namespace (containerd, the kubelet, every container).
func (m *member) kill() {
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// stop shuts the node down: its init stops the kubelet, kube-proxy and containerd.
func (m *member) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		m.kill()
	}
}

func tail(file string, lines int) string {
	b, _ := os.ReadFile(file)
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// memberInit runs in a joining node's namespaces: it waits for its network, starts
// containerd with the images, the kubelet and kube-proxy, and stops them on SIGTERM.
func memberInit(planFile string) int {
	b, err := os.ReadFile(planFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	var p memberPlan
	if err := json.Unmarshal(b, &p); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	bins, err := findBinaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	n := &node{dir: p.Dir, name: p.Name, ip: p.IP, podCIDR: p.PodCIDR, bins: bins}
	defer n.stop()
	if err := n.boot(&p); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "node: kubelet and kube-proxy running")
	<-sigs
	fmt.Fprintln(os.Stderr, "node: stopping")
	return 0
}

func (n *node) boot(p *memberPlan) error {
	if err := mountNode(p.Dir, p.Name); err != nil {
		return err
	}
	if err := memberNetwork(p); err != nil {
		return err
	}
	// Images come from the run's archives; anything else from the control-plane host's
	// registry (the registry's host name is localhost there, not here).
	registry := "http://" + net.JoinHostPort(p.ControlPlaneIP, strconv.Itoa(podcontract.DevRegistryPort))
	if err := n.startContainerd(registry); err != nil {
		return err
	}
	if err := n.importImages(p.ImagesDir, "pause.tar", "operator.tar", "workerd.tar"); err != nil {
		return err
	}
	k, err := n.runKubelet(p.CgroupRoot, p.Kubelet, p.KubeletCert, p.KubeletKey, p.CA)
	if err != nil {
		return err
	}
	if err := n.wait(k, 2*time.Minute, "healthz", func() error { return httpOK("http://127.0.0.1:10248/healthz") }); err != nil {
		return err
	}
	return n.runKubeProxy(p.KubeProxy)
}

// memberNetwork waits for the veth the control-plane host gives the namespace and
// configures it: the node's address, a default route through the bridge's gateway.
func memberNetwork(p *memberPlan) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := net.InterfaceByName("eth0"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no eth0 after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", p.IP + "/" + strconv.Itoa(nodesPrefix), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", nodesGateway},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
}

func httpOK(url string) error {
	r, err := http.Get(url)
	if err != nil {
		return err
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return errors.New(r.Status)
	}
	return nil
}
