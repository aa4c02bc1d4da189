package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// provider is the virtual-kubelet provider: every container of a pod is a local process.
type provider struct {
	c      *Cluster
	images *ImageMapping

	// apiPods lists the pods the API server has (virtual-kubelet's informer); set once
	// when the node is built, before any pod reaches the provider.
	apiPods corev1listers.PodLister

	mu     sync.Mutex
	pods   map[string]*podRun // namespace/name
	notify func(*corev1.Pod)
	ready  chan struct{} // closed once notify is set
}

func newProvider(c *Cluster) *provider {
	return &provider{c: c, images: c.cfg.Images, pods: map[string]*podRun{}, ready: make(chan struct{})}
}

func podKey(ns, name string) string { return ns + "/" + name }

// NotifyPods implements node.PodNotifier.
func (p *provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
	close(p.ready)
}

func (p *provider) send(pod *corev1.Pod) {
	<-p.ready
	p.notify(pod)
}

// CreatePod implements node.PodLifecycleHandler: it allocates the pod's address and
// starts its containers in the background.
func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	old, ok := p.pods[key]
	p.mu.Unlock()
	if ok {
		old.mu.Lock()
		same := old.pod.UID == pod.UID
		old.mu.Unlock()
		if same {
			return nil
		}
		// A new pod with the name of one still running or terminating (a StatefulSet
		// replacement): like a kubelet, start it once the old one is gone.
		return p.replace(ctx, old, pod)
	}
	ip, err := p.c.net.allocPodIP(key)
	if err != nil {
		return err
	}
	r := newPodRun(p, pod.DeepCopy(), ip)
	// The pod's own stand-in for 127.0.0.1 (loopback.go).
	if r.loop, err = p.c.net.allocPodIP(key + loopbackKey); err != nil {
		p.c.net.releasePodIP(key, ip)
		return err
	}
	p.mu.Lock()
	p.pods[key] = r
	p.mu.Unlock()
	p.c.net.podChanged()
	go r.run()
	return nil
}

// UpdatePod implements node.PodLifecycleHandler. Spec changes other than image are not
// allowed by the API server; the provider keeps the newer metadata.
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not known to the provider", pod.Namespace, pod.Name)
	}
	r.mu.Lock()
	if r.pod.UID != pod.UID {
		r.mu.Unlock()
		return p.replace(context.Background(), r, pod)
	}
	r.pod.ObjectMeta = *pod.ObjectMeta.DeepCopy()
	r.mu.Unlock()
	return nil
}

// replace terminates old (if nothing has yet) and starts pod, which has old's name and
// a new UID, once old has stopped and released its address.
func (p *provider) replace(ctx context.Context, old *podRun, pod *corev1.Pod) error {
	old.mu.Lock()
	terminating := old.terminating
	oldPod := old.pod.DeepCopy()
	old.mu.Unlock()
	if !terminating {
		if oldPod.DeletionTimestamp == nil {
			oldPod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		if err := p.DeletePod(ctx, oldPod); err != nil {
			return err
		}
	}
	fmt.Fprintf(p.c.cfg.Log, "devcluster: pod %s/%s (uid %s) replaces the run of uid %s (terminating: %t); it starts once that run has stopped\n", pod.Namespace, pod.Name, pod.UID, oldPod.UID, terminating)
	pod = pod.DeepCopy()
	go func() {
		select {
		case <-old.released:
		case <-p.c.ctx.Done():
			return
		}
		// The replacement may itself have been deleted while it waited (virtual-kubelet
		// removes a pod that never ran at once, without calling DeletePod): starting it
		// would leave processes running for a pod that does not exist.
		if !p.isAPIPod(pod.Namespace, pod.Name, pod.UID) {
			return
		}
		_ = p.CreatePod(context.Background(), pod)
	}()
	return nil
}

// DeletePod implements node.PodLifecycleHandler: it starts the termination (preStop,
// SIGTERM, SIGKILL after the grace period) and returns; the terminal status follows
// through NotifyPods.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not known to the provider", pod.Namespace, pod.Name)
	}
	r.mu.Lock()
	other := pod.UID != "" && r.pod.UID != pod.UID
	r.mu.Unlock()
	if other {
		return nil // a late delete of the pod this run replaced
	}
	grace := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	r.mu.Lock()
	r.pod.DeletionTimestamp = pod.DeletionTimestamp
	r.pod.DeletionGracePeriodSeconds = pod.DeletionGracePeriodSeconds
	r.mu.Unlock()
	go func() {
		r.terminate(time.Duration(grace) * time.Second)
		// Once per run, however often DeletePod is called for it.
		r.releaseOnce.Do(func() {
			p.mu.Lock()
			if p.pods[podKey(pod.Namespace, pod.Name)] == r {
				delete(p.pods, podKey(pod.Namespace, pod.Name))
			}
			p.mu.Unlock()
			p.c.net.releasePodIP(podKey(pod.Namespace, pod.Name), r.ip)
			p.c.net.releasePodIP(podKey(pod.Namespace, pod.Name)+loopbackKey, r.loop)
			p.c.net.podChanged()
			r.pubMu.Lock() // no publish of this run is under way or follows (publish)
			close(r.released)
			r.pubMu.Unlock()
		})
	}()
	return nil
}

// GetPod implements node.PodLifecycleHandler.
//
// A run whose pod the API server no longer has under that name — the name now belongs to
// a pod with another UID — is reported as not found. virtual-kubelet asks by name and,
// when GetPod returns a pod, compares it with the API pod without the UID (containers,
// labels, annotations) and calls neither CreatePod nor UpdatePod when they match. A
// StatefulSet replacement matches the pod it replaces whenever the pod has no
// per-pod-random field (the operator's pods mount no service account token, so none):
// if the old run still held the name when the replacement was synced (it was still
// stopping when virtual-kubelet removed the pod object at the end of the grace period,
// or the pod was force-deleted), the replacement was never started and stayed Pending
// for good (TestSameNameReplacement; e2e TestShardPodsReplaced, about 1 run in 4).
// Reported as not found, virtual-kubelet calls CreatePod, which stops the old run and
// starts the replacement once the old one has released the name (replace). With no pod
// under the name, the run is returned: virtual-kubelet then deletes it.
func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	r, ok := p.pods[podKey(ns, name)]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known to the provider", ns, name)
	}
	pod := r.snapshot()
	if api, err := p.apiPod(ns, name); err == nil && api.UID != pod.UID {
		return nil, errdefs.NotFoundf("pod %s/%s (uid %s) is not known to the provider: its run belongs to the replaced pod %s", ns, name, api.UID, pod.UID)
	}
	return pod, nil
}

// apiPod returns the pod the API server has under ns/name, as virtual-kubelet's
// informer last saw it (a NotFound error when there is none).
func (p *provider) apiPod(ns, name string) (*corev1.Pod, error) {
	if p.apiPods == nil {
		return nil, errdefs.NotFoundf("pod lister not set")
	}
	return p.apiPods.Pods(ns).Get(name)
}

// isAPIPod reports whether the API server still has the pod ns/name with that UID.
func (p *provider) isAPIPod(ns, name string, uid types.UID) bool {
	api, err := p.apiPod(ns, name)
	return err == nil && api.UID == uid
}

// GetPodStatus implements node.PodLifecycleHandler.
func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods implements node.PodLifecycleHandler.
func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, r := range p.pods {
		out = append(out, r.snapshot())
	}
	return out, nil
}

func (p *provider) podRun(ns, name string) (*podRun, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.pods[podKey(ns, name)]
	return r, ok
}

// GetContainerLogs serves `kubectl logs`: the container's current (or, with Previous,
// last terminated) log file, with Tail, LimitBytes, SinceSeconds/SinceTime, Timestamps and
// Follow, as a kubelet serves them.
func (p *provider) GetContainerLogs(ctx context.Context, ns, podName, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r, ok := p.podRun(ns, podName)
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known to the provider", ns, podName)
	}
	file, err := r.logFile(container, opts.Previous)
	if err != nil {
		return nil, err
	}
	return openLog(ctx, file, opts, func() bool { return r.containerRunning(container) })
}

// RunInContainer is not supported: there is no container to exec into.
func (p *provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errdefs.InvalidInput("exec is not supported by the local cluster (pods are plain processes)")
}

// AttachToContainer is not supported.
func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the local cluster")
}

// GetStatsSummary returns an empty summary.
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: NodeName}}, nil
}

// GetMetricsResource returns no metrics.
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

// PortForward is not supported: pod addresses are reachable from the host directly.
func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported by the local cluster: connect to the pod IP (127.1.x.y) directly")
}

// stopAll terminates every pod (used by Cluster.Stop).
func (p *provider) stopAll() {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grace := 30 * time.Second
			if g := r.pod.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = time.Duration(*g) * time.Second
			}
			if grace > 10*time.Second {
				grace = 10 * time.Second
			}
			r.terminate(grace)
		}()
	}
	wg.Wait()
}

// PodProcess describes a running container process (for tests and `dev` diagnostics).
type PodProcess struct {
	Container string
	PID       int
	LogFile   string
}

// PodProcesses lists the running container processes of a pod, sorted by container.
func (c *Cluster) PodProcesses(ns, name string) []PodProcess {
	r, ok := c.provider.podRun(ns, name)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []PodProcess
	for n, cr := range r.ctrs {
		if cr.cmd != nil && cr.cmd.Process != nil && cr.running {
			out = append(out, PodProcess{Container: n, PID: cr.cmd.Process.Pid, LogFile: cr.logPath})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Container < out[j].Container })
	return out
}

// PodRunInfo describes the provider's view of the pod namespace/name, for diagnostics
// (a test's failure message): "no run", or the run's UID and phase, whether it is
// terminating and whether it has released the name.
func (c *Cluster) PodRunInfo(ns, name string) string {
	r, ok := c.provider.podRun(ns, name)
	if !ok {
		return "no run"
	}
	r.mu.Lock()
	uid, terminating := r.pod.UID, r.terminating
	r.mu.Unlock()
	released := false
	select {
	case <-r.released:
		released = true
	default:
	}
	return fmt.Sprintf("run uid %s phase %s terminating %t released %t", uid, r.snapshot().Status.Phase, terminating, released)
}

// PodDir is the host directory holding a pod's volumes and logs.
func (c *Cluster) PodDir(ns, name string) (string, bool) {
	r, ok := c.provider.podRun(ns, name)
	if !ok {
		return "", false
	}
	return r.dir, true
}

func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

func podDirName(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)
}

func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

var _ = filepath.Join
var _ = strings.Contains
