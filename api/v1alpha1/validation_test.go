package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// These tests run the CRDs' OpenAPI and CEL validation on a real kube-apiserver
// (envtest). Each invalid case asserts the field path the API server reports.

var k8sClient client.Client

func TestMain(m *testing.M) {
	env, err := testenv.NewEnvironment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := testenv.StartEnv(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restCfg = cfg
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// obj is an unstructured object built from a YAML fixture, so cases can also carry
// values the Go types could not hold.
type obj = map[string]any

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

const workerFixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: Worker
metadata: {name: w}
spec:
  compatibilityDate: "2026-11-01"
  source:
    inline:
      modules:
        - {name: worker.js, type: ESModule, content: "export default {fetch() { return new Response('hi') }}"}
`

const donsFixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: DurableObjectNamespace
metadata: {name: d}
spec:
  workerRef: {name: chat}
  className: ChatRoom
`

const workflowFixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: Workflow
metadata: {name: f}
spec:
  workerRef: {name: orders}
  className: OrderWorkflow
`

const cronFixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: CronSchedule
metadata: {name: c}
spec:
  schedules: ["*/5 * * * *"]
  target:
    workerRef: {name: hello}
`

// validationCase mutates a valid fixture; wantField empty means the object is valid.
type validationCase struct {
	name      string
	mutate    func(spec obj)
	wantField string
}

func set(path string, v any) func(obj) {
	return func(spec obj) {
		parts := strings.Split(path, ".")
		m := spec
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(obj)
			if !ok {
				next = obj{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
}

func del(path string) func(obj) {
	return func(spec obj) {
		parts := strings.Split(path, ".")
		m := spec
		for _, p := range parts[:len(parts)-1] {
			m = m[p].(obj)
		}
		delete(m, parts[len(parts)-1])
	}
}

func all(fs ...func(obj)) func(obj) {
	return func(spec obj) {
		for _, f := range fs {
			f(spec)
		}
	}
}

func module(name, typ string, extra obj) obj {
	m := obj{"name": name, "type": typ}
	for k, v := range extra {
		m[k] = v
	}
	if _, ok := m["content"]; !ok {
		if _, ok := m["contentBase64"]; !ok {
			m["content"] = "export default {}"
		}
	}
	return m
}

func runCases(t *testing.T, fixture string, cases []validationCase) {
	t.Helper()
	ns := createNamespace(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, fixture)
			u.SetNamespace(ns)
			u.SetName(fmt.Sprintf("%s-%d", u.GetName(), i))
			spec := u.Object["spec"].(obj)
			if tc.mutate != nil {
				tc.mutate(spec)
			}
			err := k8sClient.Create(context.Background(), u)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("want admitted, got: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want rejected at %s, was admitted", tc.wantField)
			}
			assertField(t, err, tc.wantField)
		})
	}
}

func assertField(t *testing.T, err error, field string) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("want a StatusError with causes, got %T: %v", err, err)
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		if c.Field == field {
			return
		}
		fields = append(fields, c.Field)
	}
	t.Fatalf("want an error at %q, got fields %q: %v", field, fields, err)
}

// deployment sets spec.deployment.versions.
func deployment(vs ...obj) func(obj) {
	l := make([]any, len(vs))
	for i, v := range vs {
		l[i] = v
	}
	return set("deployment.versions", l)
}

func TestWorkerValidation(t *testing.T) {
	mods := func(ms ...obj) func(obj) {
		l := make([]any, len(ms))
		for i, m := range ms {
			l[i] = m
		}
		return set("source.inline.modules", l)
	}
	bindings := func(bs ...obj) func(obj) {
		l := make([]any, len(bs))
		for i, b := range bs {
			l[i] = b
		}
		return set("bindings", l)
	}
	runCases(t, workerFixture, []validationCase{
		{name: "minimal valid", mutate: nil},
		{name: "all module types", mutate: mods(
			module("worker.js", "ESModule", nil),
			module("lib.cjs", "CommonJS", obj{"content": "module.exports = 1"}),
			module("t.txt", "Text", obj{"content": "hi"}),
			module("d.bin", "Data", obj{"contentBase64": "AAE="}),
			module("m.wasm", "Wasm", obj{"contentBase64": "AGFzbQEAAAA="}),
			module("c.json", "JSON", obj{"content": "{}"}),
		)},
		{name: "all binding kinds", mutate: bindings(
			obj{"name": "A", "text": "x"},
			obj{"name": "B", "json": "{}"},
			obj{"name": "C", "secretKeyRef": obj{"name": "s", "key": "k"}},
			obj{"name": "D", "service": obj{"name": "other"}},
			obj{"name": "E", "durableObjectNamespace": obj{"name": "dons"}},
			obj{"name": "F", "workflow": obj{"name": "wf"}},
		)},
		{name: "limits at the top of their ranges", mutate: set("limits", obj{"profile": "paid", "cpuMs": int64(300000), "subrequests": int64(10000000), "memoryMiB": int64(4096)})},
		{name: "configMap source", mutate: set("source", obj{"configMap": obj{"name": "code", "main": "worker.js"}})},
		{name: "image source", mutate: set("source", obj{"image": obj{"image": "registry.example/w:1", "main": "index.js", "path": "/bundle"}})},
		{name: "replicas zero", mutate: set("replicas", int64(0))},
		{name: "bad compatibilityDate", mutate: set("compatibilityDate", "2026-13-01"), wantField: "spec.compatibilityDate"},
		{name: "missing compatibilityDate", mutate: del("compatibilityDate"), wantField: "spec.compatibilityDate"},
		{name: "no source", mutate: set("source", obj{}), wantField: "spec.source"},
		{name: "two sources", mutate: set("source.configMap", obj{"name": "code", "main": "worker.js"}), wantField: "spec.source"},
		{name: "no modules", mutate: mods(), wantField: "spec.source.inline.modules"},
		{name: "bad module type", mutate: mods(module("worker.js", "Python", nil)), wantField: "spec.source.inline.modules[0].type"},
		{name: "module with both contents", mutate: mods(module("worker.js", "ESModule", obj{"content": "x", "contentBase64": "AA=="})), wantField: "spec.source.inline.modules[0]"},
		{name: "wasm without base64", mutate: mods(module("worker.js", "ESModule", nil), module("m.wasm", "Wasm", obj{"content": "x"})), wantField: "spec.source.inline.modules[1]"},
		{name: "module name with ..", mutate: mods(module("a/../b.js", "ESModule", nil)), wantField: "spec.source.inline.modules[0].name"},
		{name: "module name absolute", mutate: mods(module("/etc/passwd", "ESModule", nil)), wantField: "spec.source.inline.modules[0].name"},
		{name: "duplicate module names", mutate: mods(module("a.js", "ESModule", nil), module("a.js", "ESModule", nil)), wantField: "spec.source.inline.modules[1]"},
		// delivery_delay: 0 to 43200 s (https://developers.cloudflare.com/queues/configuration/configure-queues/).
		{name: "queue with a delivery delay of 12 hours", mutate: bindings(obj{"name": "Q", "queue": obj{"name": "jobs", "deliveryDelay": int64(43200)}})},
		{name: "queue delivery delay over 12 hours", mutate: bindings(obj{"name": "Q", "queue": obj{"name": "jobs", "deliveryDelay": int64(43201)}}), wantField: "spec.bindings[0].queue.deliveryDelay"},
		{name: "queue delivery delay negative", mutate: bindings(obj{"name": "Q", "queue": obj{"name": "jobs", "deliveryDelay": int64(-1)}}), wantField: "spec.bindings[0].queue.deliveryDelay"},
		{name: "binding with two values", mutate: bindings(obj{"name": "A", "text": "x", "json": "{}"}), wantField: "spec.bindings[0]"},
		{name: "binding with no value", mutate: bindings(obj{"name": "A"}), wantField: "spec.bindings[0]"},
		{name: "binding name not an identifier", mutate: bindings(obj{"name": "my-var", "text": "x"}), wantField: "spec.bindings[0].name"},
		{name: "cpuMs above 300000", mutate: set("limits", obj{"cpuMs": int64(300001)}), wantField: "spec.limits.cpuMs"},
		{name: "cpuMs zero", mutate: set("limits", obj{"cpuMs": int64(0)}), wantField: "spec.limits.cpuMs"},
		{name: "subrequests above 10000000", mutate: set("limits", obj{"subrequests": int64(10000001)}), wantField: "spec.limits.subrequests"},
		{name: "memoryMiB below 16", mutate: set("limits", obj{"memoryMiB": int64(8)}), wantField: "spec.limits.memoryMiB"},
		{name: "unknown profile", mutate: set("limits", obj{"profile": "enterprise"}), wantField: "spec.limits.profile"},
		{name: "negative replicas", mutate: set("replicas", int64(-1)), wantField: "spec.replicas"},
		{name: "replicas above 1000", mutate: set("replicas", int64(1001)), wantField: "spec.replicas"},
		{name: "compat flag with capitals", mutate: set("compatibilityFlags", []any{"Nodejs_Compat"}), wantField: "spec.compatibilityFlags[0]"},
		{name: "service port 0", mutate: set("service", obj{"port": int64(0)}), wantField: "spec.service.port"},
		{name: "service type ExternalName", mutate: set("service", obj{"type": "ExternalName"}), wantField: "spec.service.type"},
		{name: "runtime image without version", mutate: set("runtime", obj{"image": "x/workerd:1"}), wantField: "spec"},
		{name: "runtime version malformed", mutate: set("runtime", obj{"version": "latest"}), wantField: "spec.runtime.version"},
		// Gradual deployments: one or two versions whose percentages add up to 100
		// (https://developers.cloudflare.com/workers/versions-and-deployments/gradual-deployments/).
		{name: "deployment of one version", mutate: deployment(obj{"versionId": "latest", "percentage": int64(100)})},
		{name: "deployment split 90/10", mutate: deployment(obj{"versionId": "0123456789abcdef", "percentage": int64(90)}, obj{"versionId": "latest", "percentage": int64(10)})},
		{name: "deployment percentages add up to 110", mutate: deployment(obj{"versionId": "0123456789abcdef", "percentage": int64(90)}, obj{"versionId": "latest", "percentage": int64(20)}), wantField: "spec.deployment.versions"},
		{name: "deployment of one version at 50", mutate: deployment(obj{"versionId": "latest", "percentage": int64(50)}), wantField: "spec.deployment.versions"},
		{name: "deployment lists a version twice", mutate: deployment(obj{"versionId": "latest", "percentage": int64(50)}, obj{"versionId": "latest", "percentage": int64(50)}), wantField: "spec.deployment.versions"},
		{name: "deployment of three versions", mutate: deployment(obj{"versionId": "0123456789abcdef", "percentage": int64(50)}, obj{"versionId": "fedcba9876543210", "percentage": int64(25)}, obj{"versionId": "latest", "percentage": int64(25)}), wantField: "spec.deployment.versions"},
		{name: "deployment version id malformed", mutate: deployment(obj{"versionId": "v1", "percentage": int64(100)}), wantField: "spec.deployment.versions[0].versionId"},
		{name: "deployment of a version at 0 (overrides only)", mutate: deployment(obj{"versionId": "0123456789abcdef", "percentage": int64(100)}, obj{"versionId": "latest", "percentage": int64(0)})},
		{name: "deployment percentage negative", mutate: deployment(obj{"versionId": "0123456789abcdef", "percentage": int64(-1)}, obj{"versionId": "latest", "percentage": int64(101)}), wantField: "spec.deployment.versions[0].percentage"},
	})
}

func TestDurableObjectNamespaceValidation(t *testing.T) {
	runCases(t, donsFixture, []validationCase{
		{name: "minimal valid"},
		{name: "full valid", mutate: all(set("sql", true), set("shards", int64(4)), set("preventEviction", true),
			set("storage", obj{"size": "2Gi", "storageClassName": "fast", "reclaimPolicy": "Delete"}),
			set("channels", obj{"enabled": true, "binding": "CHANNELS", "maxChannels": int64(64), "maxSubscribers": int64(256), "maxMessageBytes": int64(65536), "maxBacklogBytes": int64(1048576)}))},
		{name: "one shard", mutate: set("shards", int64(1))},
		{name: "64 shards", mutate: set("shards", int64(64))},
		{name: "reclaim Retain", mutate: set("storage", obj{"reclaimPolicy": "Retain"})},
		{name: "channel limits at minimum", mutate: set("channels", obj{"maxChannels": int64(1), "maxSubscribers": int64(1), "maxMessageBytes": int64(1), "maxBacklogBytes": int64(1024)})},
		{name: "missing workerRef", mutate: del("workerRef"), wantField: "spec.workerRef"},
		{name: "empty workerRef name", mutate: set("workerRef", obj{"name": ""}), wantField: "spec.workerRef.name"},
		{name: "missing className", mutate: del("className"), wantField: "spec.className"},
		{name: "className not an identifier", mutate: set("className", "Chat-Room"), wantField: "spec.className"},
		{name: "zero shards", mutate: set("shards", int64(0)), wantField: "spec.shards"},
		{name: "65 shards", mutate: set("shards", int64(65)), wantField: "spec.shards"},
		{name: "bad reclaimPolicy", mutate: set("storage", obj{"reclaimPolicy": "Recycle"}), wantField: "spec.storage.reclaimPolicy"},
		{name: "bad storage size", mutate: set("storage", obj{"size": "lots"}), wantField: "spec.storage.size"},
		{name: "65 channels", mutate: set("channels", obj{"maxChannels": int64(65)}), wantField: "spec.channels.maxChannels"},
		{name: "257 subscribers", mutate: set("channels", obj{"maxSubscribers": int64(257)}), wantField: "spec.channels.maxSubscribers"},
		{name: "message above 64 KiB", mutate: set("channels", obj{"maxMessageBytes": int64(65537)}), wantField: "spec.channels.maxMessageBytes"},
		{name: "backlog above 1 MiB", mutate: set("channels", obj{"maxBacklogBytes": int64(1048577)}), wantField: "spec.channels.maxBacklogBytes"},
		{name: "backlog below 1 KiB", mutate: set("channels", obj{"maxBacklogBytes": int64(1023)}), wantField: "spec.channels.maxBacklogBytes"},
		{name: "channels binding not an identifier", mutate: set("channels", obj{"binding": "1x"}), wantField: "spec.channels.binding"},
	})

	t.Run("className and workerRef are immutable", func(t *testing.T) {
		ns := createNamespace(t)
		u := fromYAML(t, donsFixture)
		u.SetNamespace(ns)
		if err := k8sClient.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		for field, mutate := range map[string]func(obj){
			"spec.className": set("className", "Other"),
			"spec.workerRef": set("workerRef", obj{"name": "other"}),
		} {
			cur := u.DeepCopy()
			mutate(cur.Object["spec"].(obj))
			err := k8sClient.Update(context.Background(), cur)
			if err == nil {
				t.Fatalf("%s: update admitted", field)
			}
			assertField(t, err, field)
		}
	})
}

func TestWorkflowValidation(t *testing.T) {
	runCases(t, workflowFixture, []validationCase{
		{name: "minimal valid"},
		{name: "full valid", mutate: all(
			set("limits", obj{"steps": int64(25000)}), set("concurrency", obj{"limit": int64(10000)}),
			set("retention", obj{"success": "30 days", "error": "7 days"}),
			set("defaults", obj{"retries": obj{"limit": int64(5), "delay": "10 seconds", "backoff": "exponential"}, "timeout": "10 minutes"}),
			set("schedules", []any{"0 * * * *"}), set("engine", obj{"shards": int64(2), "storage": obj{"size": "1Gi"}}))},
		{name: "one step", mutate: set("limits", obj{"steps": int64(1)})},
		{name: "retries limit 0", mutate: set("defaults", obj{"retries": obj{"limit": int64(0)}})},
		{name: "delay in milliseconds", mutate: set("defaults", obj{"retries": obj{"delay": "1500"}})},
		{name: "linear backoff", mutate: set("defaults", obj{"retries": obj{"backoff": "linear"}})},
		{name: "missing className", mutate: del("className"), wantField: "spec.className"},
		{name: "className not an identifier", mutate: set("className", "order workflow"), wantField: "spec.className"},
		{name: "missing workerRef", mutate: del("workerRef"), wantField: "spec.workerRef"},
		{name: "steps 0", mutate: set("limits", obj{"steps": int64(0)}), wantField: "spec.limits.steps"},
		{name: "steps 25001", mutate: set("limits", obj{"steps": int64(25001)}), wantField: "spec.limits.steps"},
		{name: "concurrency 0", mutate: set("concurrency", obj{"limit": int64(0)}), wantField: "spec.concurrency.limit"},
		{name: "concurrency 10001", mutate: set("concurrency", obj{"limit": int64(10001)}), wantField: "spec.concurrency.limit"},
		{name: "retries limit 10001", mutate: set("defaults", obj{"retries": obj{"limit": int64(10001)}}), wantField: "spec.defaults.retries.limit"},
		{name: "negative retries", mutate: set("defaults", obj{"retries": obj{"limit": int64(-1)}}), wantField: "spec.defaults.retries.limit"},
		{name: "bad backoff", mutate: set("defaults", obj{"retries": obj{"backoff": "fibonacci"}}), wantField: "spec.defaults.retries.backoff"},
		{name: "bad delay", mutate: set("defaults", obj{"retries": obj{"delay": "soon"}}), wantField: "spec.defaults.retries.delay"},
		{name: "bad timeout", mutate: set("defaults", obj{"timeout": "10 fortnights"}), wantField: "spec.defaults.timeout"},
		{name: "bad retention", mutate: set("retention", obj{"success": "forever"}), wantField: "spec.retention.success"},
		{name: "cron over 256 chars", mutate: set("schedules", []any{strings.Repeat("1,", 128) + "1 * * * *"}), wantField: "spec.schedules[0]"},
		{name: "empty cron", mutate: set("schedules", []any{""}), wantField: "spec.schedules[0]"},
		{name: "17 schedules", mutate: set("schedules", repeat("0 * * * *", 17)), wantField: "spec.schedules"},
		{name: "17 engine shards", mutate: set("engine", obj{"shards": int64(17)}), wantField: "spec.engine.shards"},
	})
}

func TestCronScheduleValidation(t *testing.T) {
	runCases(t, cronFixture, []validationCase{
		{name: "minimal valid"},
		{name: "workflow target with params", mutate: set("target", obj{"workflowRef": obj{"name": "orders"}, "params": obj{"batch": int64(10), "nested": obj{"a": []any{"b"}}}})},
		{name: "full valid", mutate: all(set("timeZone", "Europe/Paris"), set("concurrencyPolicy", "Forbid"),
			set("startingDeadlineSeconds", int64(300)), set("suspend", true), set("historyLimit", int64(100)))},
		{name: "16 schedules", mutate: set("schedules", distinctCrons(16))},
		{name: "cron of 256 chars", mutate: set("schedules", []any{strings.Repeat("1,", 123) + "1 * * * * "})},
		{name: "deadline 0", mutate: set("startingDeadlineSeconds", int64(0))},
		{name: "Replace policy", mutate: set("concurrencyPolicy", "Replace")},
		{name: "no schedules", mutate: set("schedules", []any{}), wantField: "spec.schedules"},
		{name: "missing schedules", mutate: del("schedules"), wantField: "spec.schedules"},
		{name: "17 schedules", mutate: set("schedules", distinctCrons(17)), wantField: "spec.schedules"},
		{name: "duplicate schedules", mutate: set("schedules", []any{"* * * * *", "* * * * *"}), wantField: "spec.schedules[1]"},
		{name: "cron over 256 chars", mutate: set("schedules", []any{strings.Repeat("1,", 128) + "1 * * * *"}), wantField: "spec.schedules[0]"},
		{name: "empty cron", mutate: set("schedules", []any{""}), wantField: "spec.schedules[0]"},
		{name: "no target", mutate: set("target", obj{}), wantField: "spec.target"},
		{name: "two targets", mutate: set("target", obj{"workerRef": obj{"name": "a"}, "workflowRef": obj{"name": "b"}}), wantField: "spec.target"},
		{name: "params with a worker target", mutate: set("target", obj{"workerRef": obj{"name": "a"}, "params": obj{"x": int64(1)}}), wantField: "spec.target"},
		{name: "bad concurrencyPolicy", mutate: set("concurrencyPolicy", "Queue"), wantField: "spec.concurrencyPolicy"},
		{name: "negative deadline", mutate: set("startingDeadlineSeconds", int64(-1)), wantField: "spec.startingDeadlineSeconds"},
		{name: "deadline over a day", mutate: set("startingDeadlineSeconds", int64(86401)), wantField: "spec.startingDeadlineSeconds"},
		{name: "historyLimit 101", mutate: set("historyLimit", int64(101)), wantField: "spec.historyLimit"},
		{name: "negative historyLimit", mutate: set("historyLimit", int64(-1)), wantField: "spec.historyLimit"},
		{name: "timeZone too long", mutate: set("timeZone", strings.Repeat("A", 65)), wantField: "spec.timeZone"},
	})
}

func repeat(s string, n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = s
	}
	return l
}

func distinctCrons(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = fmt.Sprintf("%d * * * *", i)
	}
	return l
}

// TestSamplesAdmitted applies every sample of config/samples to the API server.
func TestSamplesAdmitted(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	ns := createNamespace(t)
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				break
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace(ns)
			if err := k8sClient.Create(context.Background(), u); err != nil {
				t.Errorf("%s: %s %s not admitted: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("samples hold no objects")
	}
}
