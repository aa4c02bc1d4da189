package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ClusterDomain is the DNS domain of Service names.
const ClusterDomain = "cluster.local"

// Address ranges. Each running cluster on a machine holds one slot k (slot.go): its
// pod addresses are 127.<1+2k>.<n/256>.<n%256> for n in [2, 65534), and its ClusterIPs
// (the API server's --service-cluster-ip-range) are in 127.<2+2k>.0.0/16. The first
// cluster gets k = 0: pods in 127.1.0.0/16, Services in 127.2.0.0/16. ClusterIPs are
// loopback addresses on which the service proxy listens, so a ClusterIP:port is reachable
// from pods, from the API server (webhooks) and from the host alike.
func podIPBase(slot int) [2]byte { return [2]byte{127, byte(1 + 2*slot)} }

func serviceCIDR(slot int) string { return fmt.Sprintf("127.%d.0.0/16", 2+2*slot) }

// network allocates pod addresses, serves Services on their ClusterIPs (a userspace
// proxy to ready pods) and keeps the cluster hosts file.
type network struct {
	c         *Cluster
	hostsFile string
	mountBin  string
	nsOK      bool

	mu     sync.Mutex
	podIPs map[string]string // pod key -> ip
	used   map[string]bool
	next   int
	svcs   corelisters.ServiceLister
	lns    map[string]*svcListener // ns/name/port
	rr     atomic.Uint64
	kick   chan struct{}
	warned map[string]bool
}

type svcListener struct {
	ln   net.Listener
	ns   string
	name string
	port corev1.ServicePort
}

func newNetwork(c *Cluster) (*network, error) {
	n := &network{c: c, hostsFile: filepath.Join(c.dir, "hosts"), podIPs: map[string]string{}, used: map[string]bool{},
		next: 2, lns: map[string]*svcListener{}, kick: make(chan struct{}, 1), warned: map[string]bool{}}
	if err := n.writeHosts(nil); err != nil {
		return nil, err
	}
	n.mountBin, _ = exec.LookPath("mount")
	// Probe once whether unprivileged user+mount namespaces work here.
	if n.mountBin != "" {
		cmd := n.command(context.Background(), "/bin/true", nil, []string{"PATH=/usr/bin:/bin"}, c.dir)
		out, err := cmd.CombinedOutput()
		n.nsOK = err == nil && !strings.Contains(string(out), "devcluster:")
		if !n.nsOK {
			fmt.Fprintf(c.cfg.Log, "devcluster: WARNING: user+mount namespaces unavailable (%v %s): cluster names will not resolve in pods\n", err, out)
		}
	}
	return n, nil
}

func (n *network) allocPodIP(key string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.podIPs[key]; ok {
		return ip, nil
	}
	for range 65532 {
		i := n.next
		n.next++
		if n.next >= 65534 {
			n.next = 2
		}
		base := podIPBase(n.c.slot)
		ip := fmt.Sprintf("%d.%d.%d.%d", base[0], base[1], i/256, i%256)
		if i%256 == 0 || i%256 == 255 || n.used[ip] {
			continue
		}
		n.used[ip] = true
		n.podIPs[key] = ip
		return ip, nil
	}
	return "", fmt.Errorf("devcluster: no free pod address in 127.%d.0.0/16 (65532 pods)", podIPBase(n.c.slot)[1])
}

func (n *network) releasePodIP(key, ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.podIPs[key] == ip {
		delete(n.podIPs, key)
	}
	delete(n.used, ip)
}

// podChanged asks for the hosts file and proxies to be refreshed.
func (n *network) podChanged() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// run watches Services and refreshes listeners and the hosts file on every change.
func (n *network) run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(n.c.client, 5*time.Minute)
	inf := f.Core().V1().Services()
	n.svcs = inf.Lister()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.podChanged() },
		UpdateFunc: func(any, any) { n.podChanged() },
		DeleteFunc: func(any) { n.podChanged() },
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() {
		defer func() {
			n.mu.Lock()
			for _, l := range n.lns {
				l.ln.Close()
			}
			n.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.kick:
			}
			n.sync()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return nil
}

// endpoint is a ready (or published) address of a Service.
type endpoint struct {
	ip       string
	hostname string // pod hostname when the pod's subdomain is the service
	ports    map[string]int32
	pod      *corev1.Pod
}

// endpoints lists the pods selected by svc, ready ones only unless
// publishNotReadyAddresses.
func (n *network) endpoints(svc *corev1.Service) []endpoint {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	pods, _ := n.c.provider.GetPods(context.Background())
	var out []endpoint
	for _, p := range pods {
		if p.Namespace != svc.Namespace || !sel.Matches(labels.Set(p.Labels)) || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready && !svc.Spec.PublishNotReadyAddresses {
			continue
		}
		ep := endpoint{ip: p.Status.PodIP, pod: p}
		if p.Spec.Subdomain == svc.Name {
			ep.hostname = p.Spec.Hostname
			if ep.hostname == "" {
				ep.hostname = p.Name
			}
		}
		out = append(out, ep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ip < out[j].ip })
	return out
}

// targetPort resolves a Service port's target on a pod (named ports by container port name).
func targetPort(sp corev1.ServicePort, pod *corev1.Pod) int32 {
	if sp.TargetPort.Type == intstr.Int {
		if sp.TargetPort.IntVal == 0 {
			return sp.Port
		}
		return sp.TargetPort.IntVal
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, cp := range c.Ports {
			if cp.Name == sp.TargetPort.StrVal {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

func (n *network) sync() {
	if n.svcs == nil {
		return
	}
	svcs, _ := n.svcs.List(labels.Everything())
	want := map[string]bool{}
	hosts := map[string][]string{}
	for _, s := range svcs {
		fq := fmt.Sprintf("%s.%s.svc.%s", s.Name, s.Namespace, ClusterDomain)
		eps := n.endpoints(s)
		for _, ep := range eps {
			if ep.hostname != "" {
				hosts[ep.hostname+"."+fq] = append(hosts[ep.hostname+"."+fq], ep.ip)
			}
		}
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone || s.Spec.ClusterIP == ""
		if headless {
			for _, ep := range eps {
				hosts[fq] = append(hosts[fq], ep.ip)
			}
			continue
		}
		hosts[fq] = []string{s.Spec.ClusterIP}
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", s.Namespace, s.Name, sp.Port)
			want[key] = true
			n.mu.Lock()
			l, ok := n.lns[key]
			if ok && l.ln.Addr().String() != net.JoinHostPort(s.Spec.ClusterIP, fmt.Sprint(sp.Port)) {
				l.ln.Close()
				delete(n.lns, key)
				ok = false
			}
			if ok {
				l.port = sp
			}
			n.mu.Unlock()
			if ok {
				continue
			}
			addr := net.JoinHostPort(s.Spec.ClusterIP, fmt.Sprint(sp.Port))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				n.mu.Lock()
				if !n.warned[key] && !(s.Namespace == "default" && s.Name == "kubernetes") {
					n.warned[key] = true
					hint := ""
					if sp.Port < 1024 {
						hint = " (ports below 1024 need root or `sysctl net.ipv4.ip_unprivileged_port_start=0`)"
					}
					fmt.Fprintf(n.c.cfg.Log, "devcluster: WARNING: Service %s/%s port %d: cannot listen on %s: %v%s\n", s.Namespace, s.Name, sp.Port, addr, err, hint)
				}
				n.mu.Unlock()
				continue
			}
			l = &svcListener{ln: ln, ns: s.Namespace, name: s.Name, port: sp}
			n.mu.Lock()
			n.lns[key] = l
			n.mu.Unlock()
			go n.serve(l)
		}
	}
	n.mu.Lock()
	for k, l := range n.lns {
		if !want[k] {
			l.ln.Close()
			delete(n.lns, k)
		}
	}
	n.mu.Unlock()
	if err := n.writeHosts(hosts); err != nil {
		fmt.Fprintf(n.c.cfg.Log, "devcluster: hosts file: %v\n", err)
	}
}

func (n *network) serve(l *svcListener) {
	acceptLoop(l.ln, func(conn net.Conn) { n.forward(l, conn) }, func(err error, wait time.Duration) {
		fmt.Fprintf(n.c.cfg.Log, "devcluster: Service %s/%s port %d: accept: %v; retrying in %v\n", l.ns, l.name, l.port.Port, err, wait)
	})
}

// acceptLoop hands every connection of ln to handle, each on its own goroutine, until
// ln is closed. Any other Accept error (EMFILE when the machine is out of file
// descriptors, ECONNABORTED) is retried with a backoff from 5 ms to 1 s, as
// net/http.Server does: a Service must come back once descriptors are free rather
// than stay dead while its listener is still registered.
func acceptLoop(ln net.Listener, handle func(net.Conn), retry func(err error, wait time.Duration)) {
	var wait time.Duration
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			retry(err, wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		go handle(conn)
	}
}

// forward proxies one connection to a ready endpoint, round-robin, trying the next
// endpoint when a dial fails.
func (n *network) forward(l *svcListener, in net.Conn) {
	defer in.Close()
	svc, err := n.svcs.Services(l.ns).Get(l.name)
	if err != nil {
		return
	}
	n.mu.Lock()
	sp := l.port
	n.mu.Unlock()
	if l.ns == "default" && l.name == "kubernetes" {
		// The API server's own Service: forward to its secure port.
		out, err := net.DialTimeout("tcp", strings.TrimPrefix(n.c.apiURL, "https://"), 2*time.Second)
		if err != nil {
			return
		}
		defer out.Close()
		pipe(in, out)
		return
	}
	eps := n.endpoints(svc)
	if len(eps) == 0 {
		return
	}
	start := int(n.rr.Add(1))
	for i := range eps {
		ep := eps[(start+i)%len(eps)]
		port := targetPort(sp, ep.pod)
		if port == 0 {
			continue
		}
		out, err := net.DialTimeout("tcp", net.JoinHostPort(ep.ip, fmt.Sprint(port)), 2*time.Second)
		if err != nil {
			continue
		}
		defer out.Close()
		pipe(in, out)
		return
	}
}

// pipe copies both ways until both directions are closed.
func pipe(in, out net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// writeHosts rewrites the hosts file in place (same inode, so bind mounts see it):
// localhost lines, then one line per cluster name.
func (n *network) writeHosts(hosts map[string][]string) error {
	var b strings.Builder
	b.WriteString("# generated by internal/devcluster: cluster names of the local cluster\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	names := make([]string, 0, len(hosts))
	for k := range hosts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, ip := range hosts[name] {
			fmt.Fprintf(&b, "%s\t%s\n", ip, name)
		}
	}
	old, _ := os.ReadFile(n.hostsFile)
	if string(old) == b.String() {
		return nil
	}
	f, err := os.OpenFile(n.hostsFile, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(b.String()), 0); err != nil {
		return err
	}
	return f.Truncate(int64(b.Len()))
}

// command builds the exec.Cmd of a container process: in its own process group, killed
// if this process dies, and (when available) in a new user+mount namespace where the
// cluster hosts file is bind-mounted over /etc/hosts. The wrapper shell execs the
// program, so the pid, signals and exit status are the program's own.
func (n *network) command(ctx context.Context, bin string, args, env []string, dir string) *exec.Cmd {
	var cmd *exec.Cmd
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if n.mountBin != "" && (n.nsOK || bin == "/bin/true") {
		script := `"$DEVCLUSTER_MOUNT" --make-rprivate / 2>/dev/null; "$DEVCLUSTER_MOUNT" --bind "$0" /etc/hosts 2>/dev/null || echo "devcluster: could not bind-mount the cluster hosts file" >&2; unset DEVCLUSTER_MOUNT; exec "$@"`
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, n.hostsFile, bin}, args...)...)
		env = append(append([]string(nil), env...), "DEVCLUSTER_MOUNT="+n.mountBin)
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	cmd.Cancel = func() error { return nil } // termination is explicit (terminate/kill)
	cmd.Env = append(env, "DEVCLUSTER_DIR="+n.c.dir)
	cmd.Dir = dir
	cmd.SysProcAttr = attr
	return cmd
}

// ServiceURL returns http://<ClusterIP>:<port> for a Service port (the first port when
// port is 0): the host can reach it, and it survives pod restarts.
func (c *Cluster) ServiceURL(ctx context.Context, namespace, name string, port int32) (string, error) {
	svc, err := c.client.CoreV1().Services(namespace).Get(ctx, name, metav1GetOptions)
	if err != nil {
		return "", err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("service %s/%s is headless: it has no ClusterIP to proxy", namespace, name)
	}
	for _, sp := range svc.Spec.Ports {
		if port == 0 || sp.Port == port {
			return fmt.Sprintf("http://%s", net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(sp.Port))), nil
		}
	}
	return "", fmt.Errorf("service %s/%s has no port %d", namespace, name, port)
}

// OutboundDefaultFlag is the manager flag that sets where Workers may connect by
// default (docs/outbound.md).
const OutboundDefaultFlag = "--outbound-default-allow"

// ClusterCIDRs are this cluster's Pod and Service CIDRs (loopback ranges, see podIPBase).
func (c *Cluster) ClusterCIDRs() []string {
	b := podIPBase(c.slot)
	return []string{fmt.Sprintf("%d.%d.0.0/16", b[0], b[1]), serviceCIDR(c.slot)}
}

// LocalizeInstall points the install bundle's manager at this cluster: its
// OutboundDefaultFlag allows the public internet and this cluster's Pod and Service
// CIDRs instead of the bundle's (a real cluster's) ranges.
func (c *Cluster) LocalizeInstall(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ci := range containers {
			ctr, ok := ci.(map[string]any)
			if !ok {
				continue
			}
			args, _ := ctr["args"].([]any)
			for i, a := range args {
				if s, ok := a.(string); ok && strings.HasPrefix(s, OutboundDefaultFlag+"=") {
					args[i] = OutboundDefaultFlag + "=public," + strings.Join(c.ClusterCIDRs(), ",")
				}
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return err
		}
	}
	return nil
}
