package cronschedule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Batched dispatch (docs/cron.md "Batches"): the runs of one wave that go to the same
// Worker are sent to each ready pod in one POST /scheduled-batch request
// (internal/shim/trigger.js), which starts them all at once and streams one NDJSON
// line per run as it finishes. A thousand CronSchedules on one minute then cost a
// handful of requests instead of a thousand, on the dispatcher and in workerd.

// maxBatch is the most runs in one request (the trigger shim's limit).
const maxBatch = 1000

type batchRun struct {
	cs *fleetv1alpha1.CronSchedule
	r  reservation
}

// batchable reports whether cs's runs may share a request: a Worker target, and not
// concurrencyPolicy Replace, which must cancel one run on its own.
func batchable(cs *fleetv1alpha1.CronSchedule) bool {
	return cs != nil && cs.Spec.Target.WorkerRef != nil && cs.Spec.ConcurrencyPolicy != fleetv1alpha1.ConcurrencyReplace
}

// dispatchBatch spreads runs of one Worker over its ready pods, one request per pod
// (at most maxBatch runs each). A single run, or a Worker without a ready pod or whose
// pods cannot be listed, goes the one-run way, which records why.
func (d *Dispatcher) dispatchBatch(ctx context.Context, worker types.NamespacedName, runs []batchRun, w *wave) {
	ready, err := w.readyPods(ctx, d, worker.Namespace, worker.Name)
	if len(runs) == 1 || err != nil || len(ready) == 0 {
		for _, b := range runs {
			d.dispatchIn(ctx, b.cs, b.r.cron, b.r.slot, w)
		}
		return
	}
	n := max(len(ready), (len(runs)+maxBatch-1)/maxBatch)
	chunks := make([][]batchRun, n)
	for i, b := range runs {
		chunks[i%n] = append(chunks[i%n], b)
	}
	for i, chunk := range chunks {
		if len(chunk) == 0 {
			continue
		}
		pod := ready[i%len(ready)]
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.sendBatch(ctx, pod, chunk, w)
		}()
	}
}

// sendBatch sends chunk in one request to pod and records each run as its line
// arrives. All runs share one wall-time limit (they start together): the runs not
// answered by then are recorded as exceededWallTime and the request is cancelled (the
// dispatcher stops waiting; whether workerd then cancels runs fed into a streamed
// response is workerd's behaviour, see docs/cron.md). A trigger socket without /scheduled-batch (404: a pod
// rendered by an older operator) gets the runs one by one on POST /scheduled.
func (d *Dispatcher) sendBatch(ctx context.Context, pod *corev1.Pod, chunk []batchRun, w *wave) {
	podName := pod.Name
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.WallTime)
	defer cancel()
	hs, wire := d.startBatch(ctx, chunk, w)
	if len(hs) == 0 {
		return
	}
	var fin sync.WaitGroup
	finish := func(h *runHandle, ev fleetv1alpha1.CronEvent) {
		fin.Add(1)
		go func() { // each waits for its wave: never one after another here
			defer fin.Done()
			d.finishRun(ctx, h, ev, "")
		}()
	}
	defer fin.Wait()

	body, _ := json.Marshal(map[string]any{"runs": wire})
	req, err := http.NewRequestWithContext(runCtx, http.MethodPost, d.triggerURL(pod, "/scheduled-batch"), bytes.NewReader(body))
	if err != nil {
		for _, h := range hs {
			finish(h, fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: err.Error()})
		}
		return
	}
	req.Header.Set("content-type", "application/json")
	resp, err := d.trigger(req, pod)
	if err != nil {
		for _, h := range hs {
			finish(h, d.callFailed(runCtx, podName, err))
		}
		return
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		// One request per run, all at once, each with its own wall time from now.
		for _, h := range hs {
			fin.Add(1)
			go func() {
				defer fin.Done()
				one, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.WallTime)
				defer cancel()
				finish(h, d.callPod(one, pod, h.cron, h.slot))
			}()
		}
		return
	default:
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(io.LimitReader(resp.Body, 64<<10))
		for _, h := range hs {
			finish(h, fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable,
				Message: fmt.Sprintf("pod %s: trigger socket answered %d %s", podName, resp.StatusCode, truncate(buf.String(), 200))})
		}
		return
	}
	d.readBatch(runCtx, podName, resp.Body, hs, finish)
}

// batchRunWire is one run of a /scheduled-batch request.
type batchRunWire struct {
	Cron          string `json:"cron"`
	ScheduledTime int64  `json:"scheduledTime"`
}

// startBatch registers the runs of chunk (startRun) and returns those to send.
func (d *Dispatcher) startBatch(ctx context.Context, chunk []batchRun, w *wave) ([]*runHandle, []batchRunWire) {
	var hs []*runHandle
	var wire []batchRunWire
	for _, b := range chunk {
		// Replace never batches, so a run's own cancel is not needed.
		if h := d.startRun(ctx, b.cs, b.r.cron, b.r.slot, w, func() {}); h != nil {
			hs = append(hs, h)
			wire = append(wire, batchRunWire{Cron: b.r.cron, ScheduledTime: b.r.slot.UnixMilli()})
		}
	}
	return hs, wire
}

// readBatch finishes each run of hs as its NDJSON line arrives in body, and the runs
// without a line when the answer ends (or fails, or runCtx ends) as failed calls.
func (d *Dispatcher) readBatch(runCtx context.Context, podName string, body io.Reader, hs []*runHandle, finish func(*runHandle, fleetv1alpha1.CronEvent)) {
	done := make([]bool, len(hs))
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var res triggerResult
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil || res.Outcome == "" || res.Index < 0 || res.Index >= len(hs) || done[res.Index] {
			continue
		}
		done[res.Index] = true
		finish(hs[res.Index], d.eventOf(podName, res))
	}
	for i, h := range hs {
		if done[i] {
			continue
		}
		err := sc.Err()
		if err == nil {
			err = fmt.Errorf("the batch answer ended without this run's result")
		}
		finish(h, d.callFailed(runCtx, podName, err))
	}
}
