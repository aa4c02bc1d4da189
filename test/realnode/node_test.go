package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

const (
	containerdVersion    = "2.4.2"
	corednsVersion       = "1.15.0"
	metricsServerVersion = "0.8.0"
	nodeName             = "realnode"
	nodeIP               = "10.250.0.1" // on the namespace's loopback; the API server advertises it
	podCIDR              = "10.244.0.0/24"
	serviceCIDR          = "10.96.0.0/16"
	apiServiceIP         = "10.96.0.1"
)

// kubeletSysctls are the VM-wide sysctls the kubelet sets unless they already hold
// these values; files with the values are bind-mounted over them in the namespace.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// node is the running cluster of one real node.
type node struct {
	dir        string
	name, ip   string // the Node's name and InternalIP
	podCIDR    string // its pods' addresses (the CNI bridge's range)
	bins       *binaries
	pki        *pki
	kubeconfig string // admin
	rest       *rest.Config
	client     kubernetes.Interface
	procs      []*proc
	cancel     context.CancelFunc // stops the in-process helpers (the provisioner)
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// isolate finishes the namespaces the outer process created: private mounts, a /proc
// of the new PID namespace, the kubelet's sysctls as files, /run, /var/lib and /var/log
// from the run directory, and the loopback up with the node's address.
func isolate(dir string) error {
	if err := mountNode(dir, nodeName); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", nodeIP + "/32", "dev", "lo"},
		// The namespace has no default route: without a route to the Service range,
		// connecting to a ClusterIP fails ("network is unreachable") before kube-proxy's
		// OUTPUT rules get to rewrite the destination to a pod.
		{"route", "add", serviceCIDR, "dev", "lo", "src", nodeIP},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	// Forwarding between the bridge and Service addresses, in this namespace only.
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
}

func runIP(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// mountNode makes the mounts private, mounts a /proc of the new PID namespace, binds
// the kubelet's sysctls as files and /run, /var/lib and /var/log from dir, and names
// the host.
func mountNode(dir, hostname string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	sysctls := filepath.Join(dir, "sysctl")
	if err := os.MkdirAll(sysctls, 0o755); err != nil {
		return err
	}
	for k, v := range kubeletSysctls {
		f := filepath.Join(sysctls, strings.ReplaceAll(k, "/", "."))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(f, "/proc/sys/"+k, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over /proc/sys/%s: %w", f, k, err)
		}
	}
	for _, m := range [][2]string{{"run", "/run"}, {"var-lib", "/var/lib"}, {"var-log", "/var/log"}} {
		src := filepath.Join(dir, m[0])
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(src, m[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", src, m[1], err)
		}
	}
	return syscall.Sethostname([]byte(hostname))
}

func (n *node) spawn(name, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(n.dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH="+n.bins.containerd+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p, nil
}

// wait polls ok until it holds, the process exits or the timeout passes; the error
// carries the tail of the process's log.
func (n *node) wait(p *proc, timeout time.Duration, what string, ok func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = ok(); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s (%v); log:\n%s", p.name, what, err, n.logTail(p.name, 30))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %s after %s (%v); log:\n%s", p.name, what, timeout, err, n.logTail(p.name, 30))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *node) logTail(name string, lines int) string {
	return tail(filepath.Join(n.dir, "logs", name+".log"), lines)
}

// stop stops every process in reverse start order (SIGTERM, then SIGKILL).
func (n *node) stop() {
	if n.cancel != nil {
		n.cancel()
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	n.procs = nil
}

func startNode(ctx context.Context, dir, cgroupRoot string, logf func(string, ...any)) (*node, error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	n := &node{dir: dir, name: nodeName, ip: nodeIP, podCIDR: podCIDR, bins: bins}
	for _, d := range []string{"logs", "etcd", "cni/net.d", "containerd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			n.stop()
		}
	}()
	if n.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, err
	}
	logf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
	if err := n.startControlPlane(ctx); err != nil {
		return nil, err
	}
	logf("starting containerd")
	if err := n.startContainerd("http://" + registryHost); err != nil {
		return nil, err
	}
	archives := []string{"pause.tar", "operator.tar", "workerd.tar", "bundle.tar", "s3.tar"}
	if _, err := os.Stat(filepath.Join(dir, "images", previousArchive)); err == nil {
		archives = append(archives, previousArchive)
	}
	if err := n.importImages(filepath.Join(dir, "images"), archives...); err != nil {
		return nil, err
	}
	logf("images imported; starting the kubelet")
	if err := n.startKubelet(ctx, cgroupRoot); err != nil {
		return nil, err
	}
	logf("starting kube-proxy")
	if err := n.startKubeProxy(); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	if err := n.startProvisioner(pctx); err != nil {
		return nil, err
	}
	logf("starting CoreDNS")
	if err := n.startCoreDNS(ctx); err != nil {
		return nil, err
	}
	logf("starting metrics-server")
	if err := n.startMetricsServer(ctx); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

func (n *node) startControlPlane(ctx context.Context) error {
	p, cp := n.pki, n.bins.controlPlane
	etcd, err := n.spawn("etcd", filepath.Join(cp, "etcd"),
		"--data-dir="+filepath.Join(n.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380", "--unsafe-no-fsync=true", "--log-level=warn")
	if err != nil {
		return err
	}
	if err := n.wait(etcd, 2*time.Minute, "health", func() error {
		r, err := http.Get("http://127.0.0.1:2379/health")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return errors.New(r.Status)
		}
		return nil
	}); err != nil {
		return err
	}
	crt, key, err := p.issue("apiserver", "kube-apiserver", nil,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP(apiServiceIP)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	kcrt, kkey, err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	fcrt, fkey, err := p.issue("front-proxy-client", "front-proxy-client", nil, nil, nil)
	if err != nil {
		return err
	}
	api, err := n.spawn("kube-apiserver", filepath.Join(cp, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--advertise-address="+nodeIP, "--secure-port=6443",
		"--cert-dir="+filepath.Join(n.dir, "pki", "apiserver"),
		"--tls-cert-file="+crt, "--tls-private-key-file="+key,
		"--client-ca-file="+p.CA,
		"--service-account-key-file="+p.SAPub, "--service-account-signing-key-file="+p.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+kcrt, "--kubelet-client-key="+kkey,
		"--kubelet-certificate-authority="+p.CA,
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=false",
		// The aggregation layer (metrics-server's API): the API server proxies with
		// the front-proxy client certificate, straight to the Service's endpoints.
		"--requestheader-client-ca-file="+p.CA,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+fcrt, "--proxy-client-key-file="+fkey,
		"--enable-aggregator-routing=true",
	)
	if err != nil {
		return err
	}
	if n.kubeconfig, err = p.kubeconfig("admin", "https://127.0.0.1:6443", "realnode-admin", "system:masters"); err != nil {
		return err
	}
	if n.rest, err = clientcmd.BuildConfigFromFlags("", n.kubeconfig); err != nil {
		return err
	}
	n.rest.QPS, n.rest.Burst = 50, 100
	if n.client, err = kubernetes.NewForConfig(n.rest); err != nil {
		return err
	}
	if err := n.wait(api, 5*time.Minute, "readyz", func() error {
		b, err := n.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(b) != "ok" {
			err = errors.New(string(b))
		}
		return err
	}); err != nil {
		return err
	}
	if _, err := n.spawn("kube-controller-manager", filepath.Join(cp, "kube-controller-manager"),
		"--kubeconfig="+n.kubeconfig,
		"--authentication-kubeconfig="+n.kubeconfig, "--authorization-kubeconfig="+n.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=10257",
		"--cert-dir="+filepath.Join(n.dir, "pki", "kcm"),
		"--leader-elect=false",
		"--service-account-private-key-file="+p.SAKey,
		"--root-ca-file="+p.CA,
		"--cluster-signing-cert-file="+p.CA, "--cluster-signing-key-file="+p.CAKey,
		"--use-service-account-credentials=true",
		"--controllers=*,-node-ipam-controller",
	); err != nil {
		return err
	}
	if _, err := n.spawn("kube-scheduler", filepath.Join(cp, "kube-scheduler"),
		"--kubeconfig="+n.kubeconfig,
		"--authentication-kubeconfig="+n.kubeconfig, "--authorization-kubeconfig="+n.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=10259",
		"--cert-dir="+filepath.Join(n.dir, "pki", "scheduler"),
		"--leader-elect=false",
	); err != nil {
		return err
	}
	return nil
}

const containerdSock = "/run/containerd/containerd.sock"

func (n *node) startContainerd(registry string) error {
	cniConf := filepath.Join(n.dir, "cni", "net.d")
	conf := fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %q
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  # The VM lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below containerd's.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
`, containerdSock, filepath.Join(n.dir, "containerd", "certs.d"), ociimage.PauseRef, n.bins.cniDir, cniConf, n.bins.runc)
	if err := writeRegistryHosts(filepath.Join(n.dir, "containerd", "certs.d"), registry); err != nil {
		return err
	}
	cfg := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "realnode",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.podCIDR)
	if err := os.WriteFile(filepath.Join(cniConf, "10-realnode.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("containerd", filepath.Join(n.bins.containerd, "containerd"), "--config", cfg, "--log-level", "info")
	if err != nil {
		return err
	}
	return n.wait(p, time.Minute, "socket", func() error {
		c, err := net.Dial("unix", containerdSock)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (n *node) importImages(dir string, archives ...string) error {
	for _, a := range archives {
		if _, err := n.ctr("images", "import", filepath.Join(dir, a)); err != nil {
			return err
		}
	}
	return nil
}

// ctr runs ctr in the k8s.io namespace (the CRI plugin's).
func (n *node) ctr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(n.bins.containerd, "ctr"), append([]string{"--address", containerdSock, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// kubeletCredentials issues the kubelet's kubeconfig (system:node:<name>) and its
// serving certificate for the node's address.
func (n *node) kubeletCredentials() (kubeconfig, crt, key string, err error) {
	if kubeconfig, err = n.pki.kubeconfig("kubelet-"+n.name, "https://"+nodeIP+":6443", "system:node:"+n.name, "system:nodes"); err != nil {
		return "", "", "", err
	}
	crt, key, err = n.pki.issue("kubelet-serving-"+n.name, "system:node:"+n.name, []string{"system:nodes"}, []net.IP{net.ParseIP(n.ip)}, []string{n.name})
	return kubeconfig, crt, key, err
}

func (n *node) startKubelet(ctx context.Context, cgroupRoot string) error {
	kc, crt, key, err := n.kubeletCredentials()
	if err != nil {
		return err
	}
	k, err := n.runKubelet(cgroupRoot, kc, crt, key, n.pki.CA)
	if err != nil {
		return err
	}
	return n.wait(k, 3*time.Minute, "Ready node", func() error { return nodeReady(ctx, n.client, n.name) })
}

// nodeReady is nil once node name's Ready condition is True.
func nodeReady(ctx context.Context, c kubernetes.Interface, name string) error {
	nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range nd.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
		}
	}
	return errors.New("no Ready condition")
}

// runKubelet writes the kubelet's configuration and starts it.
func (n *node) runKubelet(cgroupRoot, kc, crt, key, ca string) (*proc, error) {
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+nodeIP+"\n"), 0o644); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 hierarchies hold this VM's cgroups; cgroupfs, not systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: %q
# CoreDNS runs on the node (a process in the namespace) at the node's address.
clusterDNS: [%s]
failSwapOn: false
# The disk is shared with other work: evict only when it is really full.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 5s
`, cgroupRoot, containerdSock, n.ip, crt, key, ca, resolv, nodeIP)
	cfg := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return n.spawn("kubelet", filepath.Join(n.bins.k8s, "kubelet"),
		"--config="+cfg, "--kubeconfig="+kc,
		"--hostname-override="+n.name, "--node-ip="+n.ip, "--v=2")
}

func (n *node) startKubeProxy() error {
	kc, err := n.pki.kubeconfig("kube-proxy", "https://"+nodeIP+":6443", "system:kube-proxy")
	if err != nil {
		return err
	}
	return n.runKubeProxy(kc)
}

// runKubeProxy starts kube-proxy with kubeconfig kc and waits for its health.
func (n *node) runKubeProxy(kc string) error {
	conf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %s
clusterCIDR: 10.244.0.0/16
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# nf_conntrack_max is VM-wide: leave it alone.
conntrack: {maxPerCore: 0, min: 0}
# Pod -> Service -> pod on the same bridge without br_netfilter: masquerade so replies
# come back through the namespace's stack.
iptables: {masqueradeAll: true}
`, kc, n.name, n.ip)
	cfg := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("kube-proxy", filepath.Join(n.bins.k8s, "kube-proxy"), "--config="+cfg, "--v=2")
	if err != nil {
		return err
	}
	return n.wait(p, 2*time.Minute, "healthz", func() error {
		r, err := http.Get("http://127.0.0.1:10256/healthz")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return errors.New(r.Status)
		}
		return nil
	})
}

// startCoreDNS serves cluster names (the kubernetes plugin) on the node's address, port
// 53; the kubelet gives pods that address as their nameserver (clusterDNS).
func (n *node) startCoreDNS(ctx context.Context) error {
	kc, err := n.pki.kubeconfig("coredns", "https://"+nodeIP+":6443", "realnode-coredns", "system:masters")
	if err != nil {
		return err
	}
	corefile := fmt.Sprintf(`.:53 {
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, kc)
	cf := filepath.Join(n.dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("coredns", n.bins.coredns, "-conf", cf)
	if err != nil {
		return err
	}
	return n.wait(p, time.Minute, "an answer for kubernetes.default.svc.cluster.local", func() error {
		addrs, err := clusterResolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
		if err == nil && (len(addrs) != 1 || addrs[0] != apiServiceIP) {
			err = fmt.Errorf("answer %v, want %s", addrs, apiServiceIP)
		}
		return err
	})
}

// clusterResolver asks the node's CoreDNS.
var clusterResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(nodeIP, "53"))
}}

// registryHost is the node's own OCI registry (started in the node's network namespace,
// so the dev cluster's port is free here): `import --image registryHost/... --push`.
var registryHost = "localhost:" + strconv.Itoa(podcontract.DevRegistryPort)

// writeRegistryHosts tells containerd to pull registryHost over plain HTTP, as a
// cluster admin does for a registry without TLS (containerd's hosts.toml, under the CRI
// images plugin's config_path).
func writeRegistryHosts(dir, server string) error {
	d := filepath.Join(dir, registryHost)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, server)
	return os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hosts), 0o644)
}
