package devcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"

	"github.com/workerd-operator/workerd-operator/internal/ociregistry"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// NodeName is the name of the cluster's one node.
const NodeName = "devcluster"

// ControlPlaneBinaries are the binaries Start needs from testenv.ControlPlaneDir.
var ControlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Config says where and how to run the cluster. Only Dir is required.
type Config struct {
	// Dir is the run directory holding all state (pki, etcd data, logs, pods, volumes).
	// Its previous contents are removed at start, after stopping processes left over
	// from an earlier run in the same directory.
	Dir string
	// Kubeconfig is where the admin kubeconfig is written; default <Dir>/kubeconfig.
	Kubeconfig string
	// ImagesFile is the image mapping (see LoadImageMapping); default
	// <repo>/config/dev/images.yaml.
	ImagesFile string
	// Images overrides ImagesFile when set.
	Images *ImageMapping
	// Log receives progress lines; default io.Discard.
	Log io.Writer
	// ControlPlaneDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler; default testenv.ControlPlaneDir (built by
	// hack/build-control-plane.sh on first use).
	ControlPlaneDir string
	// Registry, when set, is the loopback host:port of an OCI registry (CNCF
	// distribution, internal/ociregistry) the cluster runs, e.g. "127.0.0.1:5001"
	// (port 0: a free one): `import --image` pushes there and image volumes not in the
	// image mapping are pulled from it. RegistryData keeps its images (default
	// <Dir>/registry/data, wiped with Dir).
	Registry     string
	RegistryData string
}

// Cluster is a running local cluster. Stop it with Stop.
type Cluster struct {
	cfg        Config
	dir        string
	pki        *pki
	kubeconfig string
	rest       *rest.Config
	client     kubernetes.Interface
	apiURL     string
	etcdURL    string // etcd's client URL (mutual TLS)

	mu     sync.Mutex
	procs  []*exec.Cmd
	ctx    context.Context
	cancel context.CancelFunc
	done   []chan struct{}

	provider *provider
	registry *ociregistry.Registry
	recorder record.EventRecorder
	net      *network
	stopOnce sync.Once
	// slot picks this cluster's address ranges (podIPBase, serviceCIDR); slotLock holds
	// it while the cluster runs.
	slot     int
	slotLock *os.File
}

// Start starts the control plane, the node, the provisioner and the service proxy, and
// returns once the node is Ready and the default ServiceAccount and StorageClass exist.
// Errors name the component that failed and its log file under <Dir>/logs.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devcluster: Config.Dir is required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	if cfg.Images == nil {
		if cfg.ImagesFile == "" {
			root, err := testenv.RepoRoot()
			if err != nil {
				return nil, fmt.Errorf("devcluster: Config.ImagesFile not set and %w", err)
			}
			cfg.ImagesFile = filepath.Join(root, "config", "dev", "images.yaml")
		}
		m, err := LoadImageMapping(cfg.ImagesFile)
		if err != nil {
			return nil, err
		}
		cfg.Images = m
	}
	bins := cfg.ControlPlaneDir
	if bins == "" {
		if bins, err = testenv.ControlPlaneDir(ControlPlaneBinaries...); err != nil {
			return nil, err
		}
	}
	killLeftovers(dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("devcluster: clean run directory: %w", err)
	}
	for _, d := range []string{"logs", "pods", "volumes", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	c := &Cluster{cfg: cfg, dir: dir}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if c.slot, c.slotLock, err = acquireSlot(); err != nil {
		return nil, err
	}
	if c.slot > 0 {
		fmt.Fprintf(cfg.Log, "devcluster: another local cluster runs on this machine; this one uses pods in 127.%d.0.0/16 and Services in %s\n", podIPBase(c.slot)[1], serviceCIDR(c.slot))
	}
	if c.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, fmt.Errorf("devcluster: certificates: %w", err)
	}
	if err := c.startRegistry(ctx); err != nil {
		return nil, err
	}
	if err := c.startControlPlane(ctx, bins); err != nil {
		return nil, err
	}
	if err := c.startNode(ctx); err != nil {
		return nil, err
	}
	ok = true
	fmt.Fprintf(cfg.Log, "devcluster: ready; kubeconfig %s\n", c.kubeconfig)
	return c, nil
}

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RestConfig returns a copy of the admin client configuration.
func (c *Cluster) RestConfig() *rest.Config { return rest.CopyConfig(c.rest) }

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// RegistryHost is "localhost:PORT" of the cluster's OCI registry ("" without one):
// the registry part of image references to push there.
func (c *Cluster) RegistryHost() string {
	if c.registry == nil {
		return ""
	}
	return c.registry.Host
}

// startRegistry runs the OCI registry of Config.Registry, if set.
func (c *Cluster) startRegistry(ctx context.Context) error {
	if c.cfg.Registry == "" {
		return nil
	}
	dir := filepath.Join(c.dir, "registry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r, err := ociregistry.Start(ctx, ociregistry.Config{Addr: c.cfg.Registry, Dir: dir, DataDir: c.cfg.RegistryData})
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	c.registry = r
	c.recordPID(r.Pid())
	fmt.Fprintf(c.cfg.Log, "devcluster: OCI registry at %s (import --image %s/NAME:TAG --push)\n", r.Host, r.Host)
	return nil
}

// Dir is the absolute run directory.
func (c *Cluster) Dir() string { return c.dir }

// Stop stops pods (SIGTERM, then SIGKILL after their grace period), the node and the
// control plane, and removes the run directory's pid file. It is safe to call twice.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.provider != nil {
			c.provider.stopAll()
		}
		if c.cancel != nil {
			c.cancel()
		}
		for _, d := range c.done {
			select {
			case <-d:
			case <-time.After(10 * time.Second):
			}
		}
		c.mu.Lock()
		procs := append([]*exec.Cmd(nil), c.procs...)
		c.mu.Unlock()
		// Stop in reverse start order: scheduler, controller-manager, apiserver, etcd.
		for i := len(procs) - 1; i >= 0; i-- {
			stopProcess(procs[i], 10*time.Second)
		}
		if c.registry != nil {
			c.registry.Stop()
		}
		os.Remove(filepath.Join(c.dir, "pids"))
		if c.slotLock != nil {
			c.slotLock.Close() // releases the flock
		}
	})
	return nil
}

func stopProcess(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// recordPID appends a process id to <dir>/pids so that a later Start in the same
// directory can stop processes a crashed run left behind.
func (c *Cluster) recordPID(pid int) {
	f, err := os.OpenFile(filepath.Join(c.dir, "pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, pid)
	f.Close()
}

func killLeftovers(dir string) {
	f, err := os.Open(filepath.Join(dir, "pids"))
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(s.Text()))
		if err != nil || pid <= 1 {
			continue
		}
		// Only processes whose command line or environment names this run directory.
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if !strings.Contains(string(cmdline), dir) && !strings.Contains(string(environ), dir) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(200 * time.Millisecond)
}

// spawn starts a control-plane process in its own process group, logging to
// <dir>/logs/<name>.log, and kills it if this process dies.
func (c *Cluster) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(c.dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "DEVCLUSTER_DIR="+c.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("devcluster: start %s: %w", name, err)
	}
	logf.Close()
	c.recordPID(cmd.Process.Pid)
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return cmd, nil
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "logs", name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, waiting for each store and server to answer before the next.
func (c *Cluster) startControlPlane(ctx context.Context, bins string) error {
	etcdURL, err := c.startEtcd(ctx, bins)
	c.etcdURL = etcdURL
	if err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, bins, etcdURL); err != nil {
		return err
	}
	fmt.Fprintln(c.cfg.Log, "devcluster: starting kube-controller-manager and kube-scheduler")
	if err := c.startControllerManager(bins); err != nil {
		return err
	}
	return c.startScheduler(bins)
}

// startEtcd starts etcd on free loopback ports and returns its client URL once healthy.
func (c *Cluster) startEtcd(ctx context.Context, bins string) (string, error) {
	etcdPort, err := freePort()
	if err != nil {
		return "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return "", err
	}
	// Mutual TLS on both URLs, as a real control plane's etcd: every pod shares this
	// machine's loopback, and plain etcd would give any of them the whole cluster.
	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("https://127.0.0.1:%d", peerPort)
	p := c.pki
	fmt.Fprintln(c.cfg.Log, "devcluster: starting etcd on", etcdURL)
	etcd, err := c.spawn("etcd", filepath.Join(bins, "etcd"),
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=default="+peerURL,
		"--cert-file="+p.EtcdCert, "--key-file="+p.EtcdKey, "--client-cert-auth", "--trusted-ca-file="+p.CAFile,
		"--peer-cert-file="+p.EtcdCert, "--peer-key-file="+p.EtcdKey, "--peer-client-cert-auth", "--peer-trusted-ca-file="+p.CAFile,
		"--unsafe-no-fsync=true", "--log-level=warn")
	if err != nil {
		return "", err
	}
	hc, err := p.etcdHTTPClient()
	if err != nil {
		return "", err
	}
	if err := waitFor(ctx, 2*time.Minute, etcd, func() bool {
		r, err := hc.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	}); err != nil {
		return "", fmt.Errorf("devcluster: etcd did not become healthy (%v); log %s:\n%s", err, filepath.Join(c.dir, "logs", "etcd.log"), c.logTail("etcd"))
	}
	return etcdURL, nil
}

// startAPIServer starts kube-apiserver on etcd, writes the admin kubeconfig, builds
// the cluster's client and waits for /readyz.
func (c *Cluster) startAPIServer(ctx context.Context, bins, etcdURL string) error {
	apiPort, err := freePort()
	if err != nil {
		return err
	}
	c.apiURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	fmt.Fprintln(c.cfg.Log, "devcluster: starting kube-apiserver on", c.apiURL)
	p := c.pki
	api, err := c.spawn("kube-apiserver", filepath.Join(bins, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--etcd-cafile="+p.CAFile, "--etcd-certfile="+p.EtcdClient, "--etcd-keyfile="+p.EtcdClientKey,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir="+filepath.Join(c.dir, "pki"),
		"--tls-cert-file="+p.APICert, "--tls-private-key-file="+p.APIKey,
		"--client-ca-file="+p.CAFile,
		"--service-account-key-file="+p.SAPub,
		"--service-account-signing-key-file="+p.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+serviceCIDR(c.slot),
		"--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate="+p.Admin, "--kubelet-client-key="+p.AdminKey,
		"--kubelet-certificate-authority="+p.CAFile,
		"--kubelet-preferred-address-types=InternalIP",
		// Webhooks are reached through the Service ClusterIP (served by the proxy):
		// aggregator routing needs EndpointSlices, which cannot hold loopback pod IPs.
		"--enable-aggregator-routing=false",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
	)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	if err := waitFor(ctx, 5*time.Minute, api, func() bool {
		b, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok"
	}); err != nil {
		return fmt.Errorf("devcluster: kube-apiserver did not become ready (%v); log %s:\n%s", err, filepath.Join(c.dir, "logs", "kube-apiserver.log"), c.logTail("kube-apiserver"))
	}
	return nil
}

// connect writes the admin kubeconfig for the API server and builds the client
// from it, so that callers and the cluster use the same credentials.
func (c *Cluster) connect() error {
	p := c.pki
	c.kubeconfig = c.cfg.Kubeconfig
	if err := writeKubeconfig(c.kubeconfig, c.apiURL, p.CAFile, p.Admin, p.AdminKey); err != nil {
		return err
	}
	var err error
	c.rest, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	c.rest.QPS, c.rest.Burst = 100, 200
	c.client, err = kubernetes.NewForConfig(c.rest)
	return err
}

func (c *Cluster) startControllerManager(bins string) error {
	kcmPort, err := freePort()
	if err != nil {
		return err
	}
	p := c.pki
	_, err = c.spawn("kube-controller-manager", filepath.Join(bins, "kube-controller-manager"),
		"--kubeconfig="+c.kubeconfig,
		"--authentication-kubeconfig="+c.kubeconfig, "--authorization-kubeconfig="+c.kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir="+filepath.Join(c.dir, "pki", "kcm"),
		"--leader-elect=false",
		"--service-account-private-key-file="+p.SAKey,
		"--root-ca-file="+p.CAFile,
		"--cluster-signing-cert-file="+p.CAFile, "--cluster-signing-key-file="+p.CAKey,
		"--use-service-account-credentials=false",
		// EndpointSlices/Endpoints reject loopback addresses: the proxy computes
		// endpoints from pods itself.
		"--controllers=*,-node-ipam-controller,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller",
		"--concurrent-deployment-syncs=2", "--concurrent-replicaset-syncs=2",
	)
	return err
}

func (c *Cluster) startScheduler(bins string) error {
	schedPort, err := freePort()
	if err != nil {
		return err
	}
	_, err = c.spawn("kube-scheduler", filepath.Join(bins, "kube-scheduler"),
		"--kubeconfig="+c.kubeconfig,
		"--authentication-kubeconfig="+c.kubeconfig, "--authorization-kubeconfig="+c.kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort),
		"--cert-dir="+filepath.Join(c.dir, "pki", "scheduler"),
		"--leader-elect=false",
	)
	return err
}

// waitFor polls ok every 200ms until it returns true, the process exits, ctx ends or
// the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, proc *exec.Cmd, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		if proc != nil && proc.ProcessState == nil {
			// Non-blocking liveness check.
			if err := syscall.Kill(proc.Process.Pid, 0); err != nil {
				return fmt.Errorf("process exited")
			}
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(proc.Process.Pid, &ws, syscall.WNOHANG, nil); pid == proc.Process.Pid {
				return fmt.Errorf("process exited with %v", ws.ExitStatus())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func writeKubeconfig(path, server, ca, cert, key string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[podcontract.DevContext] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts[podcontract.DevContext] = &clientcmdapi.Context{Cluster: podcontract.DevContext, AuthInfo: "admin"}
	cfg.CurrentContext = podcontract.DevContext
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}
