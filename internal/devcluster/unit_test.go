package devcluster

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "127.1.0.2", "EMPTY": ""}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"--socket-addr=http=$(POD_IP):8080", "--socket-addr=http=127.1.0.2:8080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"a$(EMPTY)b", "ab"},
		{"$(unterminated", "$(unterminated"},
		{"$5", "$5"},
	} {
		if got := expand(tc.in, look); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRewriteArg(t *testing.T) {
	mounts := []pathMap{{"/etc/workerd/modules", "/h/mods"}, {"/etc/workerd", "/h/cfg"}, {"/var/lib/workerd/do", "/h/do"}}
	for _, tc := range []struct{ in, want string }{
		{"/etc/workerd/config.capnp", "/h/cfg/config.capnp"},
		{"/etc/workerd", "/h/cfg"},
		{"/etc/workerd/modules/a.js", "/h/mods/a.js"},
		{"--directory-path=do=/var/lib/workerd/do", "--directory-path=do=/h/do"},
		{"/etc/workerdx", "/etc/workerdx"},
		{"serve", "serve"},
	} {
		if got := rewriteArg(tc.in, mounts); got != tc.want {
			t.Errorf("rewriteArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStripTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ghcr.io/workerd-operator/workerd:1.20261117.1", "ghcr.io/workerd-operator/workerd"},
		{"localhost:5000/x@sha256:abc", "localhost:5000/x"},
		{"localhost:5000/x", "localhost:5000/x"},
	} {
		if got := stripTag(tc.in); got != tc.want {
			t.Errorf("stripTag(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestNestMounts: a volume mounted inside another (the modules ConfigMap at
// /etc/workerd/modules inside the config volume at /etc/workerd) is reachable through
// the outer volume's directory, as on a kubelet, so workerd's embeds relative to
// config.capnp find the modules (test/realnode shows the kubelet's behaviour).
func TestNestMounts(t *testing.T) {
	dir := t.TempDir()
	config, modules := filepath.Join(dir, "config"), filepath.Join(dir, "modules")
	for _, d := range []string{config, modules} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(modules, "index.js"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []pathMap{{from: "/etc/workerd/modules", to: modules}, {from: "/etc/workerd", to: config}, {from: "/tmp", to: filepath.Join(dir, "tmp")}}
	nestMounts(mounts)
	nestMounts(mounts) // idempotent across container restarts
	if b, err := os.ReadFile(filepath.Join(config, "modules", "index.js")); err != nil || string(b) != "x" {
		t.Fatalf("config/modules/index.js: %q, %v", b, err)
	}
	if got := rewritePath("/etc/workerd/modules/index.js", mounts); got != filepath.Join(modules, "index.js") {
		t.Errorf("rewritePath = %q", got)
	}
}

// TestLocalizeInstall: the manager's --outbound-default-allow points at this cluster's
// Pod and Service CIDRs (slot 1: 127.3.0.0/16 and 127.4.0.0/16); other args stay.
func TestLocalizeInstall(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "manager", "args": []any{"manager", OutboundDefaultFlag + "=public,10.96.0.0/12,10.244.0.0/16", "--leader-elect"}},
		}}}},
	}}
	c := &Cluster{slot: 1}
	if err := c.LocalizeInstall([]*unstructured.Unstructured{dep}); err != nil {
		t.Fatal(err)
	}
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	got := cs[0].(map[string]any)["args"]
	want := []any{"manager", OutboundDefaultFlag + "=public,127.3.0.0/16,127.4.0.0/16", "--leader-elect"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args %v, want %v", got, want)
	}
}

// TestLogSink: a process's output becomes CRI log entries
// (https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md):
// one per line, per stream, a line over 16 KiB split into partial (P) entries, output
// without a final newline a partial entry; the contents read back are the output.
func TestLogSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	sink, stdout, stderr, err := openContainerLog(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", maxLogLine+10) + "\n"
	if _, err := io.WriteString(stdout, "one\n"+long+"last"); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	if _, err := io.WriteString(stderr, "oops\n"); err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	sink.drain(time.Minute)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.SplitN(line, " ", 4)
		e, ok := parseLogEntry([]byte(line))
		if !ok {
			t.Fatalf("line %q is not a CRI entry", line)
		}
		tags = append(tags, e.stream+" "+f[2])
		out[e.stream] += string(e.content)
	}
	if out["stdout"] != "one\n"+long+"last" || out["stderr"] != "oops\n" {
		t.Errorf("contents %q", out)
	}
	stdoutTags := slices.DeleteFunc(slices.Clone(tags), func(s string) bool { return strings.HasPrefix(s, "stderr") })
	if want := []string{"stdout F", "stdout P", "stdout F", "stdout P"}; !slices.Equal(stdoutTags, want) {
		t.Errorf("stdout entries %v, want %v", stdoutTags, want)
	}
}

// TestOpenLog: `kubectl logs` options on a CRI log file, with the kubelet's semantics
// (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#get-read-log-of-the-specified-pod):
// tailLines picks the last entries, sinceTime drops entries before it, timestamps
// prefixes each entry's time, limitBytes cuts the output.
func TestOpenLog(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s int) string { return t0.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano) }
	file := filepath.Join(t.TempDir(), "0.log")
	log := at(0) + " stdout F a\n" + at(1) + " stdout F b\n" + "not an entry\n" + at(2) + " stderr F c\n" +
		at(3) + " stdout P d\n" + at(3) + " stdout F e\n" + at(4) + " stdout F incomplete"
	if err := os.WriteFile(file, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts api.ContainerLogOpts
		want string
	}{
		{"all", api.ContainerLogOpts{}, "a\nb\nc\nde\n"},
		{"tail", api.ContainerLogOpts{Tail: 2}, "de\n"},
		{"since", api.ContainerLogOpts{SinceTime: t0.Add(time.Second)}, "b\nc\nde\n"},
		{"timestamps", api.ContainerLogOpts{Tail: 3, Timestamps: true}, at(2) + " c\n" + at(3) + " d" + at(3) + " e\n"},
		{"limit", api.ContainerLogOpts{LimitBytes: 3}, "a\nb"},
		{"tail, since and limit", api.ContainerLogOpts{Tail: 4, SinceTime: t0.Add(2 * time.Second), Timestamps: true, LimitBytes: 25},
			(at(2) + " c\n" + at(3) + " d")[:25]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := openLog(context.Background(), file, tc.opts, func() bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			if string(b) != tc.want {
				t.Errorf("got %q, want %q", b, tc.want)
			}
		})
	}
}

// TestTerminationMessageFromLog: with FallbackToLogsOnError and a non-zero exit the
// message is the log's text, not its CRI entries
// (https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/#customizing-the-termination-message).
func TestTerminationMessageFromLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	log := "2026-11-30T12:00:00Z stdout F starting\n2026-11-30T12:00:01Z stderr F service main: Uncaught Error: kaboom\n"
	if err := os.WriteFile(logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &corev1.Container{TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	if got, want := terminationMessage(c, filepath.Join(dir, "termination-log"), logPath, 1), "starting\nservice main: Uncaught Error: kaboom"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got := terminationMessage(c, filepath.Join(dir, "termination-log"), logPath, 0); got != "" {
		t.Errorf("message %q after exit 0, want none", got)
	}
}
