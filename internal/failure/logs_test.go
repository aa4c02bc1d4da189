package failure

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// deniedLine is the line the pinned workerd writes (structured logging) when the outbound
// policy refuses fetch(): observed in TestClassifyLogRealWorkerd; the stack trimmed.
const deniedLine = `{"timestamp":"1796157589277","level":"error","source":"workerd/jsg/util.c++:320","message":"e = rust/worker/ffi.rs:104: failed: connecting to 10.96.0.10:8080 is not allowed\nstack: workerd@2b5edc0; sentryErrorContext = jsgInternalError; wdErrId = baf9rebdqfdfr9fe7a9jhl2o","context_depth":0}`

// TestClassifyLog: lines as the kubelet serves a container log with timestamps=true
// ("<RFC3339Nano> <line>", https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#get-read-log-of-the-specified-pod).
func TestClassifyLog(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, line string) string {
		return t0.Add(d).Format(time.RFC3339Nano) + " " + line + "\n"
	}
	subreq := `{"timestamp":"1","level":"error","source":"workerd/server/server/listen/mod.rs:372","message":"Uncaught exception: workerd/jsg/value.h:1456: failed: remote.jsg.Error: Too many subrequests."}`
	for _, tc := range []struct {
		name     string
		log      string
		after    time.Time
		cause    Cause // "" = no failure
		evidence []string
		when     time.Time
		last     time.Time
	}{
		{name: "empty"},
		{name: "a denied connection", log: at(0, `{"timestamp":1,"level":"log","message":"hello"}`) + at(time.Second+300*time.Millisecond, deniedLine),
			cause: CauseOutboundDenied, evidence: []string{"connecting to 10.96.0.10:8080 is not allowed", "reference = baf9rebdqfdfr9fe7a9jhl2o"},
			when: t0.Add(time.Second), last: t0.Add(time.Second + 300*time.Millisecond)},
		{name: "the newest of two failures wins", log: at(0, deniedLine) + at(2*time.Second, subreq) + at(3*time.Second, `{"level":"log","message":"after"}`),
			cause: CauseSubrequestCap, evidence: []string{"Too many subrequests."}, when: t0.Add(2 * time.Second), last: t0.Add(3 * time.Second)},
		{name: "lines up to after were read before", log: at(0, deniedLine) + at(time.Second, `{"level":"log","message":"x"}`), after: t0,
			last: t0.Add(time.Second)},
		{name: "the Worker's own console output is not classified",
			log:  at(0, `{"timestamp":1,"level":"error","message":"upstream timed out; connecting to 10.0.0.1:80 is not allowed"}`),
			last: t0},
		{name: "workerd's info lines are not classified", log: at(0, `{"level":"info","source":"workerd/io/x.c++:1","message":"connect timed out"}`), last: t0},
		{name: "a plain-text workerd line", log: at(0, "workerd/jsg/util.c++:320: error: e = rust/worker/ffi.rs:104: failed: connecting to [fd00::1]:5432 is not allowed"),
			cause: CauseOutboundDenied, evidence: []string{"connecting to [fd00::1]:5432 is not allowed"}, when: t0, last: t0},
		{name: "a line cut by limitBytes is left for the next read", log: at(0, `{"level":"log","message":"x"}`) + strings.TrimSuffix(at(time.Second, deniedLine), "\n"),
			last: t0},
		{name: "without kubelet timestamps, workerd's own", log: deniedLine + "\n",
			cause: CauseOutboundDenied, evidence: []string{"10.96.0.10:8080"}, when: time.UnixMilli(1796157589277).Truncate(time.Second), last: time.UnixMilli(1796157589277)},
		{name: "a line with no time at all is not recorded", log: "workerd/jsg/util.c++:320: error: connecting to 10.0.0.1:80 is not allowed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, last := ClassifyLog("web-1", "workerd", []byte(tc.log), tc.after)
			if !last.Equal(tc.last) {
				t.Errorf("last line at %v, want %v", last, tc.last)
			}
			if tc.cause == "" {
				if f != nil {
					t.Fatalf("got %+v, want no failure", f)
				}
				return
			}
			if f == nil || f.Cause != tc.cause || f.Pod != "web-1" || f.Container != "workerd" || !f.Logged || !f.Time.Time.Equal(tc.when) {
				t.Fatalf("got %+v, want cause %s at %v", f, tc.cause, tc.when)
			}
			for _, e := range tc.evidence {
				if !strings.Contains(f.Message, e) {
					t.Errorf("evidence %q does not say %q", f.Message, e)
				}
			}
			if strings.Contains(f.Message, "stack:") {
				t.Errorf("evidence %q carries the stack", f.Message)
			}
			st := f.Status()
			if st.ExitCode != nil || st.Time == nil || st.Cause != string(tc.cause) {
				t.Errorf("status %+v: want no exit code, a time and the cause", st)
			}
			if s := f.Summary(); !strings.Contains(s, "pod web-1 container workerd logged at "+tc.when.UTC().Format(time.RFC3339)) {
				t.Errorf("summary %q", s)
			}
		})
	}
}

// TestClassifyLogRealWorkerd: the pinned workerd, with the operator's logging config
// (structured logging) and a network service that denies the address, refuses a
// fetch(); its output classifies as outbound_denied naming the address, while the
// Worker's own console lines (even ones that read like failures) do not count.
func TestClassifyLogRealWorkerd(t *testing.T) {
	addr := testenv.FreeLoopbackAddr(t)
	denied := "127.0.0.1:9"
	module := fmt.Sprintf(`export default { async fetch() {
  console.error("request timed out; Too many subrequests.");
  try { await fetch("http://%s/"); } catch (e) { return new Response("error " + e.message); }
  return new Response("fetched");
} };`, denied)
	cfg := fmt.Sprintf(`using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (modules = [(name = "w.js", esModule = embed "w.js")], compatibilityDate = %q, globalOutbound = "internet")),
    (name = "internet", network = (allow = ["public"])),
  ],
  sockets = [(name = "http", address = %q, service = "main")],
  logging = (structuredLogging = true),
);
`, compatibilityDate, addr)
	r := startWorkerd(t, cfg, map[string][]byte{"w.js": []byte(module)})
	r.waitHTTP(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if body := string(getBody(t, ctx, "http://"+addr+"/")); !strings.HasPrefix(body, "error internal error; reference = ") {
		t.Fatalf("body %q, want workerd's internal error", body)
	}
	ref := strings.TrimPrefix(string(getBody(t, ctx, "http://"+addr+"/")), "error internal error; reference = ")
	var f *Failure
	for deadline := time.Now().Add(guard); f == nil || !strings.Contains(f.Message, ref); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no failure naming reference %s in:\n%s%s", ref, r.stdout.String(), r.stderr.String())
		}
		f, _ = ClassifyLog("p", "workerd", []byte(r.stdout.String()+r.stderr.String()), time.Time{})
	}
	if f.Cause != CauseOutboundDenied || !strings.Contains(f.Message, "connecting to "+denied+" is not allowed") {
		t.Errorf("got %+v, want outbound_denied naming %s", f, denied)
	}
}

// TestMerge: the failure a pass records in status.lastFailure and the one that makes it
// Degraded, from the pods' terminations, the newest failure read from their logs and
// what the status already holds.
func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local)
	running := func(name string, started time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
		}}}
	}
	crashed := func(name string, at time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(137, "OOMKilled", "", at)}},
		}}}
	}
	logged := func(pod string, at time.Time) *Failure {
		return &Failure{Cause: CauseOutboundDenied, Message: "connecting to 10.0.0.1:80 is not allowed", Pod: pod, Container: "workerd", Logged: true, Time: metav1.NewTime(at)}
	}
	denied := logged("a", t0.Add(time.Minute))
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		recorded *fleetv1.FailureStatus
		logged   *Failure
		degraded Cause // "" = healthy
		last     Cause // "" = none
	}{
		{name: "healthy", pods: []corev1.Pod{running("a", t0)}},
		{name: "a new denial", pods: []corev1.Pod{running("a", t0)}, logged: denied, degraded: CauseOutboundDenied, last: CauseOutboundDenied},
		{name: "no new lines: the recorded denial still degrades while its container runs", pods: []corev1.Pod{running("a", t0)},
			recorded: denied.Status(), degraded: CauseOutboundDenied, last: CauseOutboundDenied},
		{name: "its pod was replaced: healthy, lastFailure stays", pods: []corev1.Pod{running("b", t0.Add(2*time.Minute))},
			recorded: denied.Status(), logged: denied, last: CauseOutboundDenied},
		{name: "its container restarted since", pods: []corev1.Pod{running("a", t0.Add(2*time.Minute))},
			recorded: denied.Status(), last: CauseOutboundDenied},
		{name: "a newer termination wins", pods: []corev1.Pod{running("a", t0), crashed("b", t0.Add(2*time.Minute))},
			recorded: denied.Status(), logged: denied, degraded: CauseOOM, last: CauseOOM},
		{name: "a newer denial beats an older termination still shown", pods: []corev1.Pod{running("a", t0), crashed("b", t0.Add(-time.Minute))},
			logged: denied, degraded: CauseOutboundDenied, last: CauseOutboundDenied},
		{name: "an older denial does not replace a newer recorded failure", pods: []corev1.Pod{running("a", t0)},
			recorded: (&Failure{Cause: CauseOOM, Pod: "b", Container: "workerd", ExitCode: 137, Time: metav1.NewTime(t0.Add(time.Hour))}).Status(),
			logged:   denied, last: CauseOOM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deg, last := Merge(tc.pods, tc.recorded, tc.logged)
			if got := causeOf(deg); got != tc.degraded {
				t.Errorf("degraded by %q, want %q", got, tc.degraded)
			}
			if (last == nil && tc.last != "") || (last != nil && last.Cause != string(tc.last)) {
				t.Errorf("lastFailure %+v, want cause %q", last, tc.last)
			}
			// A second pass over what the first wrote changes nothing (no flapping).
			deg2, last2 := Merge(tc.pods, last, tc.logged)
			if causeOf(deg2) != causeOf(deg) || !reflect.DeepEqual(last2, last) {
				t.Errorf("second pass: degraded %q, lastFailure %+v; first: %q, %+v", causeOf(deg2), last2, causeOf(deg), last)
			}
		})
	}
}

func causeOf(f *Failure) Cause {
	if f == nil {
		return ""
	}
	return f.Cause
}
