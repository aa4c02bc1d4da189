package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Restart back-off of crashed containers: starts at restartBackoffMin, doubles up to
// restartBackoffMax, and resets after a container ran restartBackoffReset. (A kubelet
// uses 10s..5m; the local cluster restarts faster so development loops stay short.)
const (
	restartBackoffMin   = 1 * time.Second
	restartBackoffMax   = 30 * time.Second
	restartBackoffReset = 60 * time.Second
)

type ctrKind int

const (
	kindInit ctrKind = iota
	kindSidecar
	kindMain
)

// ctrRun is one container of a pod: its current process and status.
type ctrRun struct {
	spec    corev1.Container
	kind    ctrKind
	status  corev1.ContainerStatus
	cmd     *exec.Cmd
	running bool
	exited  chan struct{} // closed when the current process exits
	logPath string
	prevLog string
	started bool // startup probe passed (or none) for the current process
	ready   bool
	runAt   time.Time
	env     []string
	mounts  []pathMap
}

// podRun is one pod on the node.
type podRun struct {
	p  *provider
	ip string
	// loop is the pod's stand-in for 127.0.0.1 (loopback.go).
	loop string
	dir  string

	mu          sync.Mutex
	pod         *corev1.Pod
	ctrs        map[string]*ctrRun
	order       []string
	volumes     map[string]string // volume name -> host directory
	volumesOK   bool
	initDone    bool
	terminating bool
	ctx         context.Context
	cancel      context.CancelFunc
	stopped     chan struct{}
	// released is closed once the provider has forgotten the run and freed its address
	// (DeletePod), so a new pod of the same name (a StatefulSet replacement) can start.
	released    chan struct{}
	releaseOnce sync.Once
	pubMu       sync.Mutex // serializes publish
	startTime   metav1.Time
}

func newPodRun(p *provider, pod *corev1.Pod, ip string) *podRun {
	r := &podRun{p: p, ip: ip, pod: pod, ctrs: map[string]*ctrRun{}, stopped: make(chan struct{}), released: make(chan struct{}),
		dir: filepath.Join(p.c.dir, "pods", podDirName(pod)), startTime: now()}
	r.ctx, r.cancel = context.WithCancel(p.c.ctx)
	for _, c := range pod.Spec.InitContainers {
		k := kindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			k = kindSidecar
		}
		r.addCtr(c, k)
	}
	for _, c := range pod.Spec.Containers {
		r.addCtr(c, kindMain)
	}
	return r
}

func (r *podRun) addCtr(c corev1.Container, k ctrKind) {
	r.ctrs[c.Name] = &ctrRun{spec: c, kind: k, status: corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
	}}
	r.order = append(r.order, c.Name)
}

// event records a Kubernetes event on the pod.
func (r *podRun) event(typ, reason, format string, args ...any) {
	r.p.c.recorder.Eventf(r.pod, typ, reason, format, args...)
}

func (r *podRun) run() {
	r.publish()
	if err := mkdirs(filepath.Join(r.dir, "volumes"), filepath.Join(r.dir, "logs")); err != nil {
		r.setAllWaiting("CreateContainerConfigError", err.Error())
		return
	}
	for {
		err := r.prepareVolumes(r.ctx)
		if err == nil {
			break
		}
		r.setAllWaiting("CreateContainerConfigError", err.Error())
		r.event(corev1.EventTypeWarning, "FailedMount", "%v", err)
		if !sleepCtx(r.ctx, 2*time.Second) {
			return
		}
	}
	r.mu.Lock()
	r.volumesOK = true
	r.mu.Unlock()
	r.publish()

	for _, c := range r.pod.Spec.InitContainers {
		cr := r.ctrs[c.Name]
		if cr.kind == kindSidecar {
			go r.supervise(cr)
			// A sidecar counts as started once its startup probe passed (or it runs).
			for {
				r.mu.Lock()
				ok := cr.started
				r.mu.Unlock()
				if ok {
					break
				}
				if !sleepCtx(r.ctx, 100*time.Millisecond) {
					return
				}
			}
			continue
		}
		backoff := restartBackoffMin
		for {
			code, err := r.runOnce(cr)
			if r.ctx.Err() != nil {
				return
			}
			if err == nil && code == 0 {
				break
			}
			if r.pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				r.publish()
				return
			}
			r.mu.Lock()
			cr.status.RestartCount++
			r.mu.Unlock()
			r.setWaiting(cr, "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed init container %s", backoff, cr.spec.Name))
			if !sleepCtx(r.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, restartBackoffMax)
		}
	}
	r.mu.Lock()
	r.initDone = true
	r.mu.Unlock()
	r.publish()
	for _, c := range r.pod.Spec.Containers {
		go r.supervise(r.ctrs[c.Name])
	}
}

// runOnce starts cr, waits for it to exit and returns its exit code.
func (r *podRun) runOnce(cr *ctrRun) (int32, error) {
	if err := r.startProcess(cr); err != nil {
		return -1, err
	}
	r.mu.Lock()
	cr.started, cr.ready = true, false
	exited := cr.exited
	r.mu.Unlock()
	r.publish()
	<-exited
	r.mu.Lock()
	code := cr.status.LastTerminationState.Terminated.ExitCode
	r.mu.Unlock()
	return code, nil
}

// supervise runs a sidecar or main container for the pod's life, restarting it as the
// restart policy says, with back-off.
func (r *podRun) supervise(cr *ctrRun) {
	backoff := restartBackoffMin
	for r.ctx.Err() == nil {
		if err := r.startProcess(cr); err != nil {
			if !sleepCtx(r.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, restartBackoffMax)
			continue
		}
		r.mu.Lock()
		exited := cr.exited
		r.mu.Unlock()
		pctx, pcancel := context.WithCancel(r.ctx)
		go r.probeLoop(pctx, cr, exited)
		<-exited
		pcancel()
		if r.ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		term := cr.status.LastTerminationState.Terminated
		ranFor := time.Since(cr.runAt)
		r.mu.Unlock()
		restart := cr.kind == kindSidecar || r.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
			(r.pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && term.ExitCode != 0)
		if !restart {
			r.mu.Lock()
			cr.status.State = corev1.ContainerState{Terminated: term.DeepCopy()}
			r.mu.Unlock()
			r.publish()
			return
		}
		if ranFor > restartBackoffReset {
			backoff = restartBackoffMin
		}
		r.mu.Lock()
		cr.status.RestartCount++
		r.mu.Unlock()
		r.setWaiting(cr, "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, cr.spec.Name, r.pod.Name))
		if !sleepCtx(r.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, restartBackoffMax)
	}
}

func (r *podRun) setWaiting(cr *ctrRun, reason, msg string) {
	r.mu.Lock()
	cr.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	cr.status.Ready = false
	r.mu.Unlock()
	r.publish()
}

func (r *podRun) setAllWaiting(reason, msg string) {
	r.mu.Lock()
	for _, cr := range r.ctrs {
		cr.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	r.mu.Unlock()
	r.publish()
}

// startProcess starts the container's process: binary from the image mapping, env,
// args with $(VAR) expansion and mount-path rewriting, output to the log file, in a
// user+mount namespace with the cluster hosts file as /etc/hosts.
func (r *podRun) startProcess(cr *ctrRun) error {
	ps, err := r.processSpec(cr)
	if err != nil {
		return err
	}
	r.mu.Lock()
	restarts := cr.status.RestartCount
	r.mu.Unlock()
	ctrLogDir := filepath.Join(r.dir, "logs", cr.spec.Name)
	if err := mkdirs(ctrLogDir); err != nil {
		return err
	}
	logPath := filepath.Join(ctrLogDir, fmt.Sprintf("%d.log", restarts))
	sink, stdout, stderr, err := openContainerLog(logPath)
	if err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(ctrLogDir, "termination-log"))
	// Not r.ctx: the process outlives cancellation until terminate stops it.
	cmd := r.p.c.net.command(context.Background(), ps.bin, ps.argv, ps.env, ps.workDir)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Start()
	stdout.Close()
	stderr.Close()
	if err != nil {
		sink.drain(time.Second)
		r.setWaiting(cr, "CreateContainerError", fmt.Sprintf("start %s: %v", ps.bin, err))
		r.event(corev1.EventTypeWarning, "Failed", "container %s: start %s: %v", cr.spec.Name, ps.bin, err)
		return err
	}
	r.p.c.recordPID(cmd.Process.Pid)
	exited := make(chan struct{})
	r.markRunning(cr, cmd, exited, logPath, ps)
	r.event(corev1.EventTypeNormal, "Started", "Started container %s (pid %d, %s)", cr.spec.Name, cmd.Process.Pid, ps.bin)
	r.publish()
	go r.awaitExit(cr, cmd, exited, sink, filepath.Join(ctrLogDir, "termination-log"), logPath)
	return nil
}

// openContainerLog opens a container's CRI log file and the pipes of its stdout and
// stderr (the caller closes its copies once the process has them).
func openContainerLog(path string) (*logSink, *os.File, *os.File, error) {
	sink, err := newLogSink(path)
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := sink.pipe("stdout")
	if err != nil {
		sink.drain(0)
		return nil, nil, nil, err
	}
	stderr, err := sink.pipe("stderr")
	if err != nil {
		stdout.Close()
		sink.drain(0)
		return nil, nil, nil, err
	}
	return sink, stdout, stderr, nil
}

// procSpec is what a container's process runs with, paths already rewritten to
// the pod's mounts.
type procSpec struct {
	bin     string
	argv    []string
	env     []string
	workDir string
	mounts  []pathMap
}

// processSpec resolves a container's binary, arguments, environment and working
// directory; failures set the container waiting with the kubelet's reason.
func (r *podRun) processSpec(cr *ctrRun) (procSpec, error) {
	bin, err := r.p.images.Binary(cr.spec.Image)
	if err != nil {
		r.setWaiting(cr, "ErrImageNeverPull", err.Error())
		r.event(corev1.EventTypeWarning, "ErrImageNeverPull", "container %s: %v", cr.spec.Name, err)
		return procSpec{}, err
	}
	env, err := r.containerEnv(r.ctx, &cr.spec)
	if err != nil {
		r.setWaiting(cr, "CreateContainerConfigError", err.Error())
		r.event(corev1.EventTypeWarning, "Failed", "container %s: %v", cr.spec.Name, err)
		return procSpec{}, err
	}
	ps := procSpec{bin: bin, env: env, workDir: r.dir, mounts: r.containerMounts(cr)}
	lookup := envLookup(env)
	if len(cr.spec.Command) > 0 {
		// A command replaces the image's entrypoint: its first word is a host program.
		cmd0 := expand(cr.spec.Command[0], lookup)
		p, err := exec.LookPath(rewritePath(cmd0, ps.mounts))
		if err != nil {
			r.setWaiting(cr, "CreateContainerError", fmt.Sprintf("command[0] %q: %v", cmd0, err))
			return procSpec{}, err
		}
		ps.bin = p
		for _, a := range cr.spec.Command[1:] {
			ps.argv = append(ps.argv, rewriteArg(expand(a, lookup), ps.mounts))
		}
	}
	for _, a := range cr.spec.Args {
		ps.argv = append(ps.argv, rewriteArg(expand(a, lookup), ps.mounts))
	}
	for i, e := range env {
		k, v, _ := strings.Cut(e, "=")
		env[i] = k + "=" + rewriteLoopback(rewriteArg(v, ps.mounts), r.loop)
	}
	for i, a := range ps.argv {
		ps.argv[i] = rewriteLoopback(a, r.loop)
	}
	linkNestedMounts(ps.mounts)
	if cr.spec.WorkingDir != "" {
		ps.workDir = rewritePath(cr.spec.WorkingDir, ps.mounts)
	}
	return ps, nil
}

// markRunning records a started process in the container's state; the previous
// log stays readable as the previous instance's.
func (r *podRun) markRunning(cr *ctrRun, cmd *exec.Cmd, exited chan struct{}, logPath string, ps procSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cr.logPath != "" && cr.logPath != logPath {
		cr.prevLog = cr.logPath
	}
	cr.cmd, cr.running, cr.exited, cr.logPath = cmd, true, exited, logPath
	cr.started = cr.spec.StartupProbe == nil
	cr.ready = false
	cr.runAt = time.Now()
	cr.env, cr.mounts = ps.env, ps.mounts
	cr.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now()}}
	cr.status.ContainerID = fmt.Sprintf("process://%d", cmd.Process.Pid)
	cr.status.Started = &cr.started
}

// awaitExit waits for the process and its output, records its termination and closes
// exited.
func (r *podRun) awaitExit(cr *ctrRun, cmd *exec.Cmd, exited chan struct{}, sink *logSink, termFile, logPath string) {
	term := terminated(cmd, cmd.Wait())
	sink.drain(2 * time.Second)
	term.Message = terminationMessage(&cr.spec, termFile, logPath, term.ExitCode)
	r.mu.Lock()
	if st := cr.status.State.Running; st != nil {
		term.StartedAt = st.StartedAt
	}
	cr.running, cr.ready = false, false
	cr.status.Ready = false
	cr.status.LastTerminationState = corev1.ContainerState{Terminated: term}
	cr.status.State = corev1.ContainerState{Terminated: term.DeepCopy()}
	r.mu.Unlock()
	close(exited)
	r.publish()
}

// terminated is the exit state of a waited-for process: the exit code, or 128 plus
// the signal that killed it.
func terminated(cmd *exec.Cmd, waitErr error) *corev1.ContainerStateTerminated {
	term := &corev1.ContainerStateTerminated{FinishedAt: now(), Reason: "Completed", ContainerID: fmt.Sprintf("process://%d", cmd.Process.Pid)}
	ps := cmd.ProcessState
	if ps == nil {
		if waitErr != nil {
			term.ExitCode, term.Reason, term.Message = 128, "Error", waitErr.Error()
		}
		return term
	}
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		term.ExitCode = 128 + int32(ws.Signal())
		term.Signal = int32(ws.Signal())
		term.Reason = "Error"
		return term
	}
	term.ExitCode = int32(ws.ExitStatus())
	if term.ExitCode != 0 {
		term.Reason = "Error"
	}
	return term
}

// terminationMessage follows the kubelet: the termination-message file, else (with
// FallbackToLogsOnError and a non-zero exit) the last 80 lines / 2048 bytes of the log.
func terminationMessage(c *corev1.Container, file, logPath string, code int32) string {
	if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
		if len(b) > 4096 {
			b = b[:4096]
		}
		return string(b)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || code == 0 {
		return ""
	}
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimRight(string(logContent(b)), "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > 2048 {
		s = s[len(s)-2048:]
	}
	return s
}

// kill stops the current process of cr: SIGTERM to its process group, SIGKILL after
// grace. It returns when the process has exited.
func (r *podRun) kill(cr *ctrRun, grace time.Duration) {
	r.mu.Lock()
	cmd, running, exited := cr.cmd, cr.running, cr.exited
	r.mu.Unlock()
	if !running || cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-exited
	}
}

// preStop runs the container's preStop hook (exec or sleep; httpGet too) within the
// grace period.
func (r *podRun) preStop(ctx context.Context, cr *ctrRun) {
	if cr.spec.Lifecycle == nil || cr.spec.Lifecycle.PreStop == nil {
		return
	}
	h := cr.spec.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		sleepCtx(ctx, time.Duration(h.Sleep.Seconds)*time.Second)
	case h.Exec != nil:
		if ok, msg := r.execIn(ctx, cr, h.Exec.Command); !ok {
			r.event(corev1.EventTypeWarning, "FailedPreStopHook", "container %s: %s", cr.spec.Name, msg)
		}
	case h.HTTPGet != nil:
		r.httpProbe(ctx, cr, h.HTTPGet, 30*time.Second)
	}
}

// terminate stops the pod: main containers (preStop, SIGTERM, SIGKILL at the grace
// deadline) in parallel, then sidecars in reverse order, then publishes the terminal
// status.
func (r *podRun) terminate(grace time.Duration) {
	r.mu.Lock()
	if r.terminating {
		r.mu.Unlock()
		<-r.stopped
		return
	}
	r.terminating = true
	r.mu.Unlock()
	deadline := time.Now().Add(grace)
	r.cancel() // stops restarts and probes
	stopCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range r.pod.Spec.Containers {
		cr := r.ctrs[c.Name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.preStop(stopCtx, cr)
			r.kill(cr, max(time.Until(deadline), 0))
		}()
	}
	wg.Wait()
	for i := len(r.pod.Spec.InitContainers) - 1; i >= 0; i-- {
		cr := r.ctrs[r.pod.Spec.InitContainers[i].Name]
		if cr.kind != kindSidecar {
			continue
		}
		r.preStop(stopCtx, cr)
		r.kill(cr, max(time.Until(deadline), 2*time.Second))
	}
	r.mu.Lock()
	for _, cr := range r.ctrs {
		if cr.status.State.Terminated == nil {
			term := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "the container was not running when the pod was deleted", FinishedAt: now()}
			if cr.status.LastTerminationState.Terminated != nil && cr.status.State.Waiting != nil {
				term = cr.status.LastTerminationState.Terminated.DeepCopy()
			}
			cr.status.State = corev1.ContainerState{Terminated: term}
		}
		cr.status.Ready = false
	}
	r.mu.Unlock()
	r.publish()
	close(r.stopped)
}

func (r *podRun) containerRunning(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cr, ok := r.ctrs[name]
	return ok && cr.running
}

func (r *podRun) logFile(container string, previous bool) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if container == "" && len(r.order) == 1 {
		container = r.order[0]
	}
	cr, ok := r.ctrs[container]
	if !ok {
		return "", fmt.Errorf("container %q is not in pod %s/%s", container, r.pod.Namespace, r.pod.Name)
	}
	if previous {
		if cr.prevLog == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, r.pod.Name)
		}
		return cr.prevLog, nil
	}
	if cr.logPath == "" {
		return "", fmt.Errorf("container %q in pod %q is waiting to start", container, r.pod.Name)
	}
	return cr.logPath, nil
}

// snapshot returns the pod with its current status.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pod.DeepCopy()
	pod.Status = r.statusLocked()
	return pod
}

// publish sends the pod's status to virtual-kubelet. Snapshot and send happen under
// pubMu, so the last status sent is the newest one: virtual-kubelet keeps the last it
// was given, and two goroutines (a readiness probe and the container runner) publishing
// at once could otherwise leave an older snapshot, e.g. a ready container shown not ready.
//
// A run that has released its name sends nothing more: virtual-kubelet keys statuses by
// namespace/name, so a late status of the old run (a container's exit noticed after
// terminate) would be taken as the status of the replacement that now has the name.
func (r *podRun) publish() {
	r.pubMu.Lock()
	select {
	case <-r.released:
	default:
		r.p.send(r.snapshot())
	}
	r.pubMu.Unlock()
	r.p.c.net.podChanged()
}

func cond(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s, reason = corev1.ConditionTrue, ""
	}
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now()}
}

// statusLocked computes the pod status from the containers (r.mu held).
func (r *podRun) statusLocked() corev1.PodStatus {
	st := *r.pod.Status.DeepCopy()
	st.HostIP, st.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	st.PodIP, st.PodIPs = r.ip, []corev1.PodIP{{IP: r.ip}}
	st.StartTime = &r.startTime
	st.InitContainerStatuses, st.ContainerStatuses = nil, nil
	allMainReady, allStarted, allMainDone, anyFailed := true, true, true, false
	sidecarsReady := true
	for _, name := range r.order {
		cr := r.ctrs[name]
		cs := *cr.status.DeepCopy()
		started := cr.started && cr.running
		cs.Started = &started
		cs.Ready = cr.ready && cr.running
		if cr.kind == kindInit {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		switch cr.kind {
		case kindInit, kindSidecar:
			if cr.kind == kindSidecar && !cs.Ready {
				sidecarsReady = false
			}
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		case kindMain:
			if !cs.Ready {
				allMainReady = false
			}
			if cs.State.Running == nil && cs.State.Terminated == nil {
				allStarted = false
			}
			if cs.State.Terminated == nil {
				allMainDone = false
			} else if cs.State.Terminated.ExitCode != 0 {
				anyFailed = true
			}
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
	}
	initFailed := false
	if !r.initDone && r.pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		for _, cr := range r.ctrs {
			if cr.kind == kindInit && cr.status.State.Terminated != nil && cr.status.State.Terminated.ExitCode != 0 {
				initFailed = true
			}
		}
	}
	switch {
	case initFailed:
		st.Phase = corev1.PodFailed
	case r.initDone && allMainDone && (r.terminating || r.pod.Spec.RestartPolicy != corev1.RestartPolicyAlways):
		if anyFailed {
			st.Phase = corev1.PodFailed
		} else {
			st.Phase = corev1.PodSucceeded
		}
	case r.initDone && allStarted:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	ready := r.initDone && allMainReady && sidecarsReady && !r.terminating
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true, ""),
		cond(corev1.PodReadyToStartContainers, r.volumesOK, "VolumesNotReady"),
		cond(corev1.PodInitialized, r.initDone, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, "ContainersNotReady"),
		cond(corev1.PodReady, ready, "ContainersNotReady"),
	}
	// Keep transition times stable when the status did not change.
	for i, c := range st.Conditions {
		for _, old := range r.pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				st.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	r.pod.Status.Conditions = st.Conditions
	return st
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
