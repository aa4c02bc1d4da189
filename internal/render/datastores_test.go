package render_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// startDataHost renders and starts the host pod of store h on loopback, its storage
// under dir (kept across restarts).
func startDataHost(t testing.TB, bin, dir string, h render.DataHost) *localrun.Local {
	t.Helper()
	return startHost(t, bin, dir, render.Input{Worker: render.DataHostWorker(h), DataHost: &h}, nil)
}

// startHost starts the host pod rendered from in (in.DataHost set), reaching the
// external services of externals.
func startHost(t testing.TB, bin, dir string, in render.Input, externals map[string]string) *localrun.Local {
	t.Helper()
	return startHostLogged(t, bin, dir, in, externals, nil)
}

// startHostLogged is startHost with workerd's output to out (when not nil).
func startHostLogged(t testing.TB, bin, dir string, in render.Input, externals map[string]string, output io.Writer) *localrun.Local {
	t.Helper()
	h := *in.DataHost
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	args := []string{}
	for svc, sub := range map[string]string{render.DOStorageService: "do", render.DataBlobsService: "blobs"} {
		p := filepath.Join(dir, "data", sub)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if svc == render.DataBlobsService && h.Kind != render.DataKV {
			continue
		}
		args = append(args, "--directory-path="+svc+"="+p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir, Args: args, Externals: externals, Output: output,
		Sockets: []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket, podcontract.GatewaySocket}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(); cancel() })
	return l
}

// startDataClient renders and starts a Worker running testdata/data/conformance.js with
// bindings KV (kvNamespace store) and DB (d1Database db), reaching the hosts' gateways.
func startDataClient(t testing.TB, bin string, gateways map[render.DataRef]string) *localrun.Local {
	t.Helper()
	return startDataWorker(t, bin, dataWorker(t, "conformance.js"), gateways)
}

// dataWorker is the Worker "client" whose module is testdata/data/<file>.
func dataWorker(t testing.TB, file string) *v1alpha1.Worker {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("testdata", "data", file))
	if err != nil {
		t.Fatal(err)
	}
	src := string(js)
	return &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "default"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-01-01",
		Source:            v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "main.js", Type: v1alpha1.ModuleESModule, Content: &src}}}},
	}}
}

// startDataWorker starts w as a Worker pod bound to the stores of gateways.
func startDataWorker(t testing.TB, bin string, w *v1alpha1.Worker, gateways map[render.DataRef]string) *localrun.Local {
	t.Helper()
	return startDataWorkerWith(t, bin, w, gateways, nil)
}

// startDataWorkerWith is startDataWorker reaching the external services of externals
// too (as startHost's; without a sidecar the ingress logs a failed request.cf lookup
// per request).
func startDataWorkerWith(t testing.TB, bin string, w *v1alpha1.Worker, gateways map[render.DataRef]string, externals map[string]string) *localrun.Local {
	t.Helper()
	stores, bound := dataBindings(w, gateways)
	maps.Copy(bound, externals)
	out, err := render.Render(render.Input{Worker: w, DataStores: stores})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir, Externals: bound})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(); cancel() })
	return l
}

// dataBindings binds w to the stores of gateways (KV, DB and Q by kind) and returns the
// renderer's DataStores and the external addresses reaching the gateways.
func dataBindings(w *v1alpha1.Worker, gateways map[render.DataRef]string) (map[render.DataRef]string, map[string]string) {
	stores := map[render.DataRef]string{}
	externals := map[string]string{}
	for ref, addr := range gateways {
		stores[ref] = render.DataAddress("default", ref.Kind, ref.Name, render.Options{})
		externals[string(ref.Kind)+":"+ref.Name] = addr
		o := &v1alpha1.LocalObjectReference{Name: ref.Name}
		switch ref.Kind {
		case render.DataKV:
			w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: "KV", KVNamespace: o})
		case render.DataD1:
			w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: "DB", D1Database: o})
		case render.DataQueue:
			// QD: the same Queue with wrangler's delivery_delay of 2 s.
			w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: "Q", Queue: &v1alpha1.QueueBinding{Name: ref.Name}},
				v1alpha1.Binding{Name: "QD", Queue: &v1alpha1.QueueBinding{Name: ref.Name, DeliveryDelay: ptr.To[int32](2)}})
		}
	}
	return stores, externals
}

type caseResult struct {
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

func runCase(t testing.TB, addr, name string) caseResult {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r caseResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("case %s: %v: %s", name, err, b)
	}
	return r
}

// Expected values: the return shapes and limits of Cloudflare's documentation, cited per
// case; error texts are those of workerd's binding (src/workerd/api/kv.c++, d1-api.ts)
// with the documented limit in them.
const (
	kvAPI    = "https://developers.cloudflare.com/kv/api/"
	kvLimits = "https://developers.cloudflare.com/kv/platform/limits/"
	d1API    = "https://developers.cloudflare.com/d1/worker-api/"
)

var dataCases = []struct {
	name, want, errText, source string
}{
	{"kv-text", `"hello"`, "", kvAPI + "read-key-value-pairs/ (type text, the default)"},
	{"kv-text-type", `"hello"`, "", kvAPI + "read-key-value-pairs/ ({type: \"text\"})"},
	{"kv-missing", `null`, "", kvAPI + "read-key-value-pairs/ (a missing key is null)"},
	{"kv-json", `{"a":[1,2]}`, "", kvAPI + "read-key-value-pairs/ (type json)"},
	{"kv-json-object", `{"a":[1,2]}`, "", kvAPI + "read-key-value-pairs/ ({type: \"json\"})"},
	{"kv-arrayBuffer", `[1,2,255]`, "", kvAPI + "read-key-value-pairs/ (type arrayBuffer)"},
	{"kv-stream", `"streamed"`, "", kvAPI + "read-key-value-pairs/ (type stream)"},
	{"kv-metadata", `{"value":"v","metadata":{"owner":"x","n":1},"cacheStatus":"MISS"}`, "", kvAPI + "read-key-value-pairs/#getwithmetadata-method"},
	{"kv-metadata-json", `{"value":{"v":1},"metadata":{"n":2},"cacheStatus":"MISS"}`, "", kvAPI + "read-key-value-pairs/#getwithmetadata-method"},
	{"kv-metadata-missing", `{"value":null,"metadata":null,"cacheStatus":"MISS"}`, "", kvAPI + "read-key-value-pairs/#getwithmetadata-method"},
	{"kv-metadata-1024", `1022`, "", kvLimits + " (metadata: 1024 bytes, serialized JSON)"},
	{"kv-metadata-1025", "", "KV PUT failed: 413 Metadata length of 1025 exceeds limit of 1024.", kvLimits},
	{"kv-ttl-60", `true`, "", kvAPI + "write-key-value-pairs/#expiring-keys (expirationTtl in seconds from now)"},
	{"kv-ttl-59", "", "KV PUT failed: 400 Invalid expiration_ttl of 59. Expiration TTL must be at least 60.", kvAPI + "write-key-value-pairs/#expiring-keys (at least 60 s)"},
	{"kv-expiration-past", "", "Expiration times must be at least 60 seconds in the future.", kvAPI + "write-key-value-pairs/#expiring-keys"},
	{"kv-delete", `[null,null]`, "", kvAPI + "delete-key-value-pairs/ (resolves undefined; deleting a missing key succeeds)"},
	{"kv-list", `{"page1":["l/a","l/b"],"complete1":false,"cursor1":true,"page2":["l/c"],"complete2":true,"metadata":{"k":"l/c"}}`, "", kvAPI + "list-keys/ (prefix, limit, cursor, list_complete, lexicographic order)"},
	{"kv-bulk", `[{"g1":"one","nope":null},{"g2":{"two":2}}]`, "", kvAPI + "read-key-value-pairs/#request-multiple-keys (a Map; missing keys null)"},
	{"kv-bulk-100", `100`, "", kvAPI + "read-key-value-pairs/#request-multiple-keys (up to 100 keys)"},
	{"kv-bulk-101", "", "KV GET_BULK failed: 400 You can request a maximum of 100 keys", kvAPI + "read-key-value-pairs/#request-multiple-keys"},
	{"kv-key-512", `"v"`, "", kvLimits + " (key size 512 bytes)"},
	{"kv-key-513", "", "KV PUT failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512.", kvLimits},
	{"kv-value-large", `204800`, "", kvLimits + " (values over the inline size are stored as files)"},
	{"kv-value-25MiB", `26214400`, "", kvLimits + " (value size 25 MiB)"},
	{"kv-value-over-25MiB", "", "KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400.", kvLimits},

	{"d1-migrated", `[[1,"9_init.sql"],[2,"10_more.sql"]]`, "", "https://developers.cloudflare.com/d1/reference/migrations/ (applied in order of their number prefix, 9_ before 10_, recorded in d1_migrations)"},
	{"d1-migrated-table", `2`, "", "https://developers.cloudflare.com/d1/reference/migrations/"},
	{"d1-exec", `2`, "", d1API + "d1-database/#exec (count: statements run)"},
	{"d1-run", `{"success":true,"results":[],"changes":2,"rows_written":2,"last_row_id":true,"duration":"number","rows_read":"number"}`, "", d1API + "return-object/#d1result (meta: changes, last_row_id, rows_read, rows_written, duration)"},
	{"d1-first", `[{"id":1,"v":"one"},"one",null]`, "", d1API + "prepared-statements/#first (a row object, a column value, null when no row)"},
	{"d1-all", `{"success":true,"results":[{"id":1,"v":"x"},{"id":2,"v":"y"}],"rows_read":2}`, "", d1API + "prepared-statements/#run (results as objects)"},
	{"d1-raw", `[[[1,"x"]],[["id","v"],[1,"x"]]]`, "", d1API + "prepared-statements/#raw (arrays; columnNames: true puts the names first)"},
	{"d1-batch-rollback", `["D1_ERROR: no such table: nope: SQLITE_ERROR",0]`, "", d1API + "d1-database/#batch (a failing statement aborts the batch and rolls it back)"},
	{"d1-error", "", "D1_ERROR: no such table: nope: SQLITE_ERROR", "https://developers.cloudflare.com/d1/observability/debug-d1/#error-list (D1_ERROR prefix)"},
	{"d1-syntax-error", "", `D1_ERROR: near "SELEC": syntax error at offset 0: SQLITE_ERROR`, "https://developers.cloudflare.com/d1/observability/debug-d1/#error-list"},
	{"d1-session", `[1,"string",2]`, "", d1API + "d1-database/#withsession (getBookmark returns a string after a query; a bookmark starts a session)"},
}

// TestDataBindingsConformance runs the KV and D1 bindings through real workerd: a
// KVNamespace host, a D1Database host (with two migrations) and a Worker binding both,
// as their pods are rendered. Then both hosts are killed (SIGKILL) and restarted on
// their storage: every acknowledged write is there.
func TestDataBindingsConformance(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	kvDir, d1Dir := t.TempDir(), t.TempDir()
	kvSpec, d1Spec := dataSpecs()
	kvRef, d1Ref := refOf(kvSpec), refOf(d1Spec)
	kvHost, d1Host := startDataHost(t, bin, kvDir, kvSpec), startDataHost(t, bin, d1Dir, d1Spec)
	c := startDataClient(t, bin, map[render.DataRef]string{kvRef: kvHost.Addrs[podcontract.GatewaySocket], d1Ref: d1Host.Addrs[podcontract.GatewaySocket]})
	for _, tc := range dataCases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCase(t, c.Addrs[podcontract.HTTPSocket], tc.name)
			if r.Error != "" {
				t.Fatalf("threw %q (source: %s)", r.Error, tc.source)
			}
			got := string(r.Value)
			if tc.errText != "" {
				var msg string
				_ = json.Unmarshal(r.Value, &msg)
				if !strings.Contains(msg, tc.errText) {
					t.Fatalf("error %q, want it to contain %q (source: %s)", msg, tc.errText, tc.source)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s (source: %s)", got, tc.want, tc.source)
			}
		})
	}
	// SIGKILL both hosts; the writes they acknowledged are on their disks.
	kvHost.Stop()
	d1Host.Stop()
	kvHost, d1Host = startDataHost(t, bin, kvDir, kvSpec), startDataHost(t, bin, d1Dir, d1Spec)
	c = startDataClient(t, bin, map[render.DataRef]string{kvRef: kvHost.Addrs[podcontract.GatewaySocket], d1Ref: d1Host.Addrs[podcontract.GatewaySocket]})
	for name, want := range map[string]string{"kv-read": `["hello",26214400,{"k":"l/c"}]`, "d1-read": `[2,[[1,"x"]]]`, "d1-migrated": `[[1,"9_init.sql"],[2,"10_more.sql"]]`, "d1-migrated-table": `2`} {
		if r := runCase(t, c.Addrs[podcontract.HTTPSocket], name); string(r.Value) != want || r.Error != "" {
			t.Errorf("after SIGKILL and restart, %s: got %s %q, want %s", name, r.Value, r.Error, want)
		}
	}
}

const (
	queuesAPI       = "https://developers.cloudflare.com/queues/configuration/javascript-apis/"
	configureQueues = "https://developers.cloudflare.com/queues/configuration/configure-queues/"
)

// queueCases are the sends of the Queue conformance tests and their answers.
var queueCases = []struct{ name, want, source string }{
	{"q-send", `["backlogBytes","backlogCount","oldestMessageTimestamp"]`, queuesAPI + "#queuesendresponse (metadata.metrics)"},
	{"q-send-types", `"sent"`, queuesAPI + "#queuesendoptions (contentType text, json, bytes, v8)"},
	{"q-send-batch", `"number"`, queuesAPI + "#queue (sendBatch, per-message delaySeconds)"},
	{"q-delay", `null`, queuesAPI + "#queuesendoptions (delaySeconds)"},
	{"q-retry-dlq", `null`, queuesAPI},
	{"q-retry-all", `null`, queuesAPI},
	{"q-ack-all", `null`, queuesAPI},
	{"q-delivery-delay", `null`, configureQueues + " (a producer's delivery_delay)"},
	{"q-delivery-delay-batch", `null`, configureQueues + " (a producer's delivery_delay applies to sendBatch)"},
	{"q-delivery-delay-overridden", `null`, configureQueues + " (delaySeconds on the send or the message overrides delivery_delay)"},
	{"q-too-big", `"Queue send failed: Payload Too Large"`, "https://developers.cloudflare.com/queues/platform/limits/ (128 KB per message)"},
	{"q-too-big-1mib", `"Queue send failed: Payload Too Large"`, "https://developers.cloudflare.com/queues/platform/limits/ (128 KB per message; 1 MiB of text)"},
	{"q-too-big-v8", `"Queue send failed: Payload Too Large"`, "https://developers.cloudflare.com/queues/platform/limits/ (128 KB per message; a 200,000-character string in an object)"},
	{"q-batch-too-big", `"Queue sendBatch failed: Payload Too Large"`, "https://developers.cloudflare.com/queues/platform/limits/ (256 KB per sendBatch; 3 messages of 100,000 bytes)"},
	{"q-batch-101", `"Queue sendBatch failed: Payload Too Large"`, "https://developers.cloudflare.com/queues/platform/limits/ (100 messages per sendBatch)"},
}

// TestQueueConformance runs a Queue through real workerd: its host pod runs the
// consumer Worker's code (testdata/data/conformance.js, which records every delivery
// in a KVNamespace) with /workerd/queues.js, and a producer Worker sends to it through
// the gateway. Consumer settings: maxBatchTimeout 0, maxRetries 2, deadLetterQueue
// jobs-dlq consumed by the same Worker. Then the same sends from the consumer's own
// process, where the Queue is workerd's built-in queues.js bound directly, answer the
// same and end in the same deliveries: a difference is ours.
func TestQueueConformance(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	// Every message is delivered; a retried one again with attempts+1, the one that
	// always fails maxRetries+1 = 3 times, then it goes to the dead letter queue, whose
	// consumer (the same Worker) gets it once, with batch.queue "jobs-dlq"
	// (https://developers.cloudflare.com/queues/configuration/batching-retries/,
	// https://developers.cloudflare.com/queues/configuration/dead-letter-queues/).
	want := map[string]string{
		"q/jobs/plain/1":                `{"kind":"[object Object]","body":{"id":"plain"},"attempts":1,"ts":true}`,
		"q/jobs/text-body/1":            `{"kind":"[object String]","body":"text-body","attempts":1,"ts":true}`,
		"q/jobs/json-body/1":            `{"kind":"[object Object]","body":{"id":"json-body"},"attempts":1,"ts":true}`,
		"q/jobs/[object ArrayBuffer]/1": `{"kind":"[object ArrayBuffer]","body":[1,2,3],"attempts":1,"ts":true}`,
		"q/jobs/[object Date]/1":        `{"kind":"[object Date]","body":5,"attempts":1,"ts":true}`,
		"q/jobs/batch-1/1":              `{"kind":"[object Object]","body":{"id":"batch-1"},"attempts":1,"ts":true}`,
		"q/jobs/batch-2/1":              `{"kind":"[object Object]","body":{"id":"batch-2"},"attempts":1,"ts":true}`,
		"q/jobs/delayed/1":              `{"kind":"[object Object]","body":{"id":"delayed"},"attempts":1,"ts":true}`,
		"q/jobs/always-fails/1":         `{"kind":"[object Object]","body":{"id":"always-fails","fail":true},"attempts":1,"ts":true}`,
		"q/jobs/always-fails/2":         `{"kind":"[object Object]","body":{"id":"always-fails","fail":true},"attempts":2,"ts":true}`,
		"q/jobs/always-fails/3":         `{"kind":"[object Object]","body":{"id":"always-fails","fail":true},"attempts":3,"ts":true}`,
		"q/jobs-dlq/always-fails/1":     `{"kind":"[object Object]","body":{"id":"always-fails","fail":true},"attempts":1,"ts":true}`,
		"q/jobs/ra-1/1":                 `{"kind":"[object Object]","body":{"id":"ra-1","retryAllOnce":true},"attempts":1,"ts":true}`,
		"q/jobs/ra-1/2":                 `{"kind":"[object Object]","body":{"id":"ra-1","retryAllOnce":true},"attempts":2,"ts":true}`,
		"q/jobs/aa-1/1":                 `{"kind":"[object Object]","body":{"id":"aa-1","ackAll":true},"attempts":1,"ts":true}`,
		// Through QD (delivery_delay 2): delivered 2 s after the send at the earliest,
		// unless the send or the message said delaySeconds 0.
		"q/jobs/pd-send/1":        `{"kind":"[object Object]","body":{"id":"pd-send"},"attempts":1,"ts":true,"waited2s":true}`,
		"q/jobs/pd-batch/1":       `{"kind":"[object Object]","body":{"id":"pd-batch"},"attempts":1,"ts":true,"waited2s":true}`,
		"q/jobs/pd-send-0/1":      `{"kind":"[object Object]","body":{"id":"pd-send-0"},"attempts":1,"ts":true,"waited2s":false}`,
		"q/jobs/pd-batch-msg-0/1": `{"kind":"[object Object]","body":{"id":"pd-batch-msg-0"},"attempts":1,"ts":true,"waited2s":false}`,
	}
	pods := runQueue(t, bin, false, len(want))
	for _, tc := range queueCases {
		if r := pods.sends[tc.name]; string(r.Value) != tc.want || r.Error != "" {
			t.Errorf("%s: got %s %q, want %s (source: %s)", tc.name, r.Value, r.Error, tc.want, tc.source)
		}
	}
	for k, w := range want {
		if string(pods.deliveries[k]) != w {
			t.Errorf("delivery %s: got %s, want %s", k, pods.deliveries[k], w)
		}
	}
	for k := range pods.deliveries {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected delivery %s: %s", k, pods.deliveries[k])
		}
	}
	builtIn := runQueue(t, bin, true, len(want))
	for _, tc := range queueCases {
		if p, b := pods.sends[tc.name], builtIn.sends[tc.name]; string(p.Value) != string(b.Value) || p.Error != b.Error {
			t.Errorf("%s: through the pods %s %q, workerd's built-in queue %s %q", tc.name, p.Value, p.Error, b.Value, b.Error)
		}
	}
	if !maps.EqualFunc(pods.deliveries, builtIn.deliveries, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Errorf("deliveries through the pods:\n%s\nwith workerd's built-in queue:\n%s", pods.deliveries, builtIn.deliveries)
	}
}

// TestQueueErrorCodes: from compatibility date 2026-03-12 (queue_expose_error_codes),
// workerd's queue binding throws "<cause> (<code>)" from the headers of the Queue's
// refusal; through the host's gateway an oversized send gets Cloudflare's code and cause
// (https://developers.cloudflare.com/queues/reference/error-codes/), not workerd's
// "Unknown Internal Error (15000)" for a refusal without them.
func TestQueueErrorCodes(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	h := render.DataHost{Kind: render.DataQueue, Namespace: "default", Name: "jobs"}
	q := startDataHost(t, bin, t.TempDir(), h)
	w := dataWorker(t, "conformance.js")
	w.Spec.CompatibilityDate = "2026-03-12"
	c := startDataWorker(t, bin, w, map[render.DataRef]string{refOf(h): q.Addrs[podcontract.GatewaySocket]})
	for name, want := range map[string]string{
		"q-too-big":       `"Message size out of bounds (10204)"`,
		"q-too-big-1mib":  `"Message size out of bounds (10204)"`,
		"q-too-big-v8":    `"Message size out of bounds (10204)"`,
		"q-batch-too-big": `"Batch size out of bounds (10205)"`,
		"q-batch-101":     `"Batch count out of bounds (10206)"`,
	} {
		if r := runCase(t, c.Addrs[podcontract.HTTPSocket], name); string(r.Value) != want || r.Error != "" {
			t.Errorf("%s: got %s %q, want %s", name, r.Value, r.Error, want)
		}
	}
}

// queueRun is what one run of the Queue conformance sends answered and delivered.
type queueRun struct {
	sends      map[string]caseResult
	deliveries map[string]json.RawMessage
}

// runQueue starts a KV namespace and the Queue "jobs" hosted by its consumer (the
// conformance Worker), runs queueCases from a producer — a client Worker through the
// Queue's gateway, or with inProcess the consumer's own process, where the queue is
// bound directly — and waits for n deliveries (or 90 s).
func runQueue(t *testing.T, bin string, inProcess bool, n int) queueRun {
	t.Helper()
	kvSpec := render.DataHost{Kind: render.DataKV, Namespace: "default", Name: "store"}
	kvHost := startDataHost(t, bin, t.TempDir(), kvSpec)
	gateways := map[render.DataRef]string{refOf(kvSpec): kvHost.Addrs[podcontract.GatewaySocket]}
	zero, two := int32(0), int32(2)
	h := render.DataHost{Kind: render.DataQueue, Namespace: "default", Name: "jobs",
		Consumer:           &render.QueueConsumer{MaxBatchTimeout: &zero, MaxRetries: &two, DeadLetterQueue: "jobs-dlq"},
		DeadLetterConsumer: &render.QueueConsumer{MaxBatchTimeout: &zero}}
	consumer := dataWorker(t, "conformance.js")
	consumer.Name = "consumer"
	hostGateways := maps.Clone(gateways)
	if inProcess {
		hostGateways[refOf(h)] = ""
	}
	stores, externals := dataBindings(consumer, hostGateways)
	delete(externals, string(h.Kind)+":"+h.Name)
	qHost := startHost(t, bin, t.TempDir(), render.Input{Worker: consumer, DataHost: &h, DataStores: stores}, externals)
	addr := qHost.Addrs[podcontract.HTTPSocket]
	if !inProcess {
		gateways[refOf(h)] = qHost.Addrs[podcontract.GatewaySocket]
		addr = startDataClient(t, bin, gateways).Addrs[podcontract.HTTPSocket]
	}
	run := queueRun{sends: map[string]caseResult{}}
	for _, tc := range queueCases {
		run.sends[tc.name] = runCase(t, addr, tc.name)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := runCase(t, addr, "q-deliveries")
		run.deliveries = nil
		_ = json.Unmarshal(r.Value, &run.deliveries)
		if len(run.deliveries) >= n || time.Now().After(deadline) {
			return run
		}
		time.Sleep(200 * time.Millisecond)
	}
}
