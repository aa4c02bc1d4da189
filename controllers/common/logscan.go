package common

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Bounds of one log read (docs/failures.md "Failures in running pods"): the newest
// scanTailLines lines after the last read, at most scanLimitBytes (the server cuts
// there), within scanTimeout; scanConcurrency reads at a time.
const (
	scanTailLines   = 100
	scanLimitBytes  = 64 << 10
	scanTimeout     = 10 * time.Second
	scanConcurrency = 4
)

// LogScanner reads, every interval, the workerd container's log of each Ready pod of
// one component (e.g. the Workers' pods) and classifies workerd's own lines
// (failure.ClassifyLog): a failure in a pod that runs on — a connection the outbound
// policy refused, a subrequest cap, a timeout — never terminates a container, so
// ClassifyPods cannot see it. It keeps the newest failure of each owner (the object
// named by the pods' owner label) for the owner's reconciler, which records it in its
// status (SetPassConditions), and wakes that reconciler through Source when there is
// a newer one.
//
// A read is a live pods/log call (the API server asks the pod's kubelet), not a cache
// read: each Ready pod costs one call per interval, for at most the newest
// scanTailLines lines since the pod's previous read (sinceTime) and scanLimitBytes, with
// scanConcurrency calls at a time; a round that takes longer than the interval delays
// the next. Runs on the leader only, like the reconcilers.
type LogScanner struct {
	pods       corev1client.PodsGetter
	reader     client.Reader
	interval   time.Duration
	ownerLabel string
	component  string
	log        logr.Logger
	events     chan event.GenericEvent

	mu sync.Mutex
	// cursors: per pod, the time of the newest line read (the next read's sinceTime).
	cursors map[types.UID]time.Time
	// newest: per owner, the newest failure read from its pods' logs.
	newest map[types.NamespacedName]*failure.Failure
}

// NewLogScanner returns a scanner of the Ready pods labeled component (label
// podcontract.LabelComponent) listed through reader, owned by the object of the same
// namespace named by their ownerLabel, reading logs through pods every interval.
func NewLogScanner(pods corev1client.PodsGetter, reader client.Reader, interval time.Duration, ownerLabel, component string, log logr.Logger) *LogScanner {
	return &LogScanner{
		pods: pods, reader: reader, interval: interval, ownerLabel: ownerLabel, component: component, log: log,
		events:  make(chan event.GenericEvent, 1024),
		cursors: map[types.UID]time.Time{},
		newest:  map[types.NamespacedName]*failure.Failure{},
	}
}

// Start scans every interval until ctx ends (manager.Runnable; the manager runs it on
// the leader only).
func (s *LogScanner) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, s.Scan, s.interval)
	return nil
}

// Source wakes the owner's reconciler when a scan found a newer failure.
func (s *LogScanner) Source() source.Source {
	return source.Channel(s.events, &handler.EnqueueRequestForObject{})
}

// Newest is the newest failure read from the logs of owner's pods; nil when none (or
// for a nil scanner: scanning is off).
func (s *LogScanner) Newest(owner types.NamespacedName) *failure.Failure {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest[owner]
}

// Forget drops what the scanner holds for owner (the owner is gone).
func (s *LogScanner) Forget(owner types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.newest, owner)
}

// Scan reads the log of every Ready pod of the component once. Errors are logged, one
// line per round; a pod whose read failed is read again next round from the same time.
func (s *LogScanner) Scan(ctx context.Context) {
	list := &corev1.PodList{}
	if err := s.reader.List(ctx, list, client.MatchingLabels{podcontract.LabelComponent: s.component}); err != nil {
		s.log.Error(err, "listing pods for the failure log scan")
		return
	}
	ready := ReadyPods(list.Items)
	var (
		g      errgroup.Group
		mu     sync.Mutex
		failed int
		first  error
	)
	g.SetLimit(scanConcurrency)
	for _, p := range ready {
		owner := p.Labels[s.ownerLabel]
		if owner == "" {
			continue
		}
		g.Go(func() error {
			if err := s.scanPod(ctx, p, types.NamespacedName{Namespace: p.Namespace, Name: owner}); err != nil {
				mu.Lock()
				if failed++; first == nil {
					first = fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	s.prune(ready)
	if failed > 0 {
		s.log.Error(first, "reading workerd logs for failures", "failedPods", failed, "readyPods", len(ready))
	}
}

// scanPod reads p's workerd log since its cursor and keeps a newer failure for owner.
func (s *LogScanner) scanPod(ctx context.Context, p *corev1.Pod, owner types.NamespacedName) error {
	s.mu.Lock()
	since := s.cursors[p.UID]
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	rc, err := s.pods.Pods(p.Namespace).GetLogs(p.Name, logScanOptions(since)).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, scanLimitBytes))
	if err != nil {
		return err
	}
	f, last := failure.ClassifyLog(p.Name, podcontract.WorkerdContainer, b, since)
	s.mu.Lock()
	if last.After(since) {
		s.cursors[p.UID] = last
	}
	newer := f != nil && (s.newest[owner] == nil || f.Time.After(s.newest[owner].Time.Time))
	if newer {
		s.newest[owner] = f
	}
	s.mu.Unlock()
	if !newer {
		return nil
	}
	s.log.V(1).Info("read a failure from a workerd log", "pod", p.Name, "namespace", p.Namespace, "cause", f.Cause)
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name}}
	select {
	case s.events <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
	return nil
}

// prune drops the cursors of pods that are no longer Ready (gone, or restarting: a
// restarted container's log is new, read from its tail again).
func (s *LogScanner) prune(ready []*corev1.Pod) {
	keep := make(map[types.UID]bool, len(ready))
	for _, p := range ready {
		keep[p.UID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.cursors {
		if !keep[uid] {
			delete(s.cursors, uid)
		}
	}
}

// logScanOptions are the options of one read of the workerd log: lines after since
// (none: the log's tail), with the kubelet's timestamps, the newest scanTailLines lines
// and at most scanLimitBytes. sinceTime travels at second precision, so the lines of
// since's second come again; ClassifyLog skips those up to since.
func logScanOptions(since time.Time) *corev1.PodLogOptions {
	o := &corev1.PodLogOptions{
		Container: podcontract.WorkerdContainer, Timestamps: true,
		TailLines: ptr.To[int64](scanTailLines), LimitBytes: ptr.To[int64](scanLimitBytes),
	}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		o.SinceTime = &t
	}
	return o
}
