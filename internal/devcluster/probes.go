package devcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeLoop runs the startup probe, then liveness and readiness probes of the current
// process of cr until it exits. A failed startup or liveness probe kills the process
// (SIGTERM, SIGKILL after the grace period), and supervise restarts it.
func (r *podRun) probeLoop(ctx context.Context, cr *ctrRun, exited chan struct{}) {
	spec := cr.spec
	if sp := spec.StartupProbe; sp != nil {
		if !r.runProbe(ctx, cr, sp, "Startup", true) {
			return
		}
		r.mu.Lock()
		cr.started = true
		r.mu.Unlock()
		r.publish()
	}
	if spec.ReadinessProbe == nil {
		r.mu.Lock()
		cr.ready = true
		r.mu.Unlock()
		r.publish()
	} else {
		go r.runProbe(ctx, cr, spec.ReadinessProbe, "Readiness", false)
	}
	if lp := spec.LivenessProbe; lp != nil {
		go r.runProbe(ctx, cr, lp, "Liveness", false)
	}
	select {
	case <-ctx.Done():
	case <-exited:
	}
}

// runProbe probes every period. For "Startup" it returns true once the probe
// succeeded; for "Readiness" it sets cr.ready; for "Liveness" and "Startup" it kills the
// process after failureThreshold failures in a row.
func (r *podRun) runProbe(ctx context.Context, cr *ctrRun, p *corev1.Probe, kind string, once bool) bool {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	failThreshold := max(p.FailureThreshold, 1)
	if p.FailureThreshold == 0 {
		failThreshold = 3
	}
	succThreshold := max(p.SuccessThreshold, 1)
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return false
	}
	fails, succs := int32(0), int32(0)
	for {
		ok, msg := r.probeOnce(ctx, cr, &p.ProbeHandler, timeout)
		if ctx.Err() != nil {
			return false
		}
		if ok {
			fails = 0
			succs++
			if once && succs >= succThreshold {
				return true
			}
			if kind == "Readiness" && succs >= succThreshold {
				r.mu.Lock()
				changed := !cr.ready
				cr.ready = true
				r.mu.Unlock()
				if changed {
					r.publish()
				}
			}
		} else {
			succs = 0
			fails++
			if fails == 1 || fails == failThreshold {
				r.event(corev1.EventTypeWarning, "Unhealthy", "%s probe failed for container %s: %s", kind, cr.spec.Name, msg)
			}
			if kind == "Readiness" && fails >= failThreshold {
				r.mu.Lock()
				changed := cr.ready
				cr.ready = false
				r.mu.Unlock()
				if changed {
					r.publish()
				}
			}
			if kind != "Readiness" && fails >= failThreshold {
				r.event(corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", cr.spec.Name, kind)
				grace := 30 * time.Second
				if g := r.pod.Spec.TerminationGracePeriodSeconds; g != nil {
					grace = time.Duration(*g) * time.Second
				}
				if p.TerminationGracePeriodSeconds != nil {
					grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
				}
				go r.kill(cr, grace)
				return false
			}
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

func (r *podRun) probeOnce(ctx context.Context, cr *ctrRun, h *corev1.ProbeHandler, timeout time.Duration) (bool, string) {
	switch {
	case h.HTTPGet != nil:
		return r.httpProbe(ctx, cr, h.HTTPGet, timeout)
	case h.TCPSocket != nil:
		host := h.TCPSocket.Host
		if host == "" {
			host = r.ip
		}
		port, err := resolvePort(h.TCPSocket.Port, &cr.spec)
		if err != nil {
			return false, err.Error()
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	case h.Exec != nil:
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return r.execIn(pctx, cr, h.Exec.Command)
	case h.GRPC != nil:
		return false, "grpc probes are not supported by the local cluster"
	}
	return true, ""
}

func (r *podRun) httpProbe(ctx context.Context, cr *ctrRun, g *corev1.HTTPGetAction, timeout time.Duration) (bool, string) {
	host := g.Host
	if host == "" {
		host = r.ip
	}
	port, err := resolvePort(g.Port, &cr.spec)
	if err != nil {
		return false, err.Error()
	}
	scheme := strings.ToLower(string(corev1.URISchemeHTTP))
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = strings.ToLower(string(corev1.URISchemeHTTPS))
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), g.Path)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q is not a named port of container %s", p.StrVal, c.Name)
}

// execIn runs a command "in" the container: the host program command[0] with the
// container's env, path rewriting and hosts file.
func (r *podRun) execIn(ctx context.Context, cr *ctrRun, command []string) (bool, string) {
	if len(command) == 0 {
		return false, "empty exec command"
	}
	r.mu.Lock()
	env, mounts := cr.env, cr.mounts
	r.mu.Unlock()
	bin, err := exec.LookPath(rewritePath(command[0], mounts))
	if err != nil {
		return false, err.Error()
	}
	args := make([]string, 0, len(command)-1)
	for _, a := range command[1:] {
		args = append(args, rewriteArg(a, mounts))
	}
	cmd := r.p.c.net.command(ctx, bin, args, env, r.dir)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("%v: %s", err, truncate(string(out), 512))
	}
	return true, ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
