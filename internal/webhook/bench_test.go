package webhook

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// benchCreates is the number of creates per arm.
const benchCreates = 2000

// benchRound counts BenchmarkAdmissionRoundTrip's rounds in this process (-count).
var benchRound int

// BenchmarkAdmissionRoundTrip measures the latency of creating a Worker through the
// API server with the webhooks (namespace bench-webhook: defaulting + validation) and
// without them (namespace bench-nowebhook, excluded by the namespace selector), 2,000
// creates each, interleaved in one run so both arms see the same machine load, after one
// unmeasured create per namespace (one-time API server warm-up, see below). It
// reports p50/p99 per arm and writes them to docs/benchmarks.md (section "Admission
// webhooks"). Run: go test ./internal/webhook -run '^$' -bench AdmissionRoundTrip -benchtime 1x
func BenchmarkAdmissionRoundTrip(b *testing.B) {
	s := startSuite(b)
	ctx := context.Background()
	// One unmeasured create per namespace first: the first Worker create after the API
	// server starts takes about 2 s with or without webhooks (measured 2.0 s in
	// bench-nowebhook), and the first webhook call opens the connection. Both arms
	// start warm instead of the first-measured arm absorbing that one-time cost.
	// Names carry the round, so that -count N creates new Workers in every round.
	benchRound++
	for _, ns := range []string{"bench-webhook", NoWebhookNamespace} {
		w := newWorker(fmt.Sprintf("warm-up-%d", benchRound), limits.Paid, nil)
		w.Namespace = ns
		w.Spec.Limits = nil
		if err := s.c.Create(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	load := loadAverage()
	before, err := sampleCallTimes(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	profDone := profileAPIServer(ctx, b, s)
	handshakes := s.handshakes.Load()
	for iter := 0; iter < b.N; iter++ {
		with := make([]time.Duration, 0, benchCreates)
		without := make([]time.Duration, 0, benchCreates)
		for i := 0; i < benchCreates; i++ {
			for _, arm := range []struct {
				ns  string
				out *[]time.Duration
			}{{"bench-webhook", &with}, {NoWebhookNamespace, &without}} {
				w := newWorker(fmt.Sprintf("b%d-%d-%d", benchRound, iter, i), limits.Paid, nil)
				w.Namespace = arm.ns
				w.Spec.Limits = nil
				start := time.Now()
				if err := s.c.Create(ctx, w); err != nil {
					b.Fatal(err)
				}
				*arm.out = append(*arm.out, time.Since(start))
			}
		}
		s.warns.take()
		handshakes = s.handshakes.Load() - handshakes
		b.ReportMetric(float64(handshakes), "tls-handshakes")
		// The tails, for reading where the overhead grows (go test -v).
		for _, q := range []float64{50, 90, 95, 99, 99.9, 100} {
			b.Logf("q%v: with webhooks %.2f ms, without %.2f ms", q, ms(pct(with, q)), ms(pct(without, q)))
		}
		wp50, wp99 := pct(with, 50), pct(with, 99)
		np50, np99 := pct(without, 50), pct(without, 99)
		b.ReportMetric(ms(wp50), "p50-webhook-ms")
		b.ReportMetric(ms(wp99), "p99-webhook-ms")
		b.ReportMetric(ms(np50), "p50-nowebhook-ms")
		b.ReportMetric(ms(np99), "p99-nowebhook-ms")
		if iter == b.N-1 {
			after, err := sampleCallTimes(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			calls := after.minus(before)
			b.ReportMetric(calls.apiserverMs(MutateWorkerPath), "mutate-call-ms")
			b.ReportMetric(calls.handlerMs(MutateWorkerPath), "mutate-handler-ms")
			b.ReportMetric(calls.apiserverMs(ValidateWorkerPath), "validate-call-ms")
			b.ReportMetric(calls.handlerMs(ValidateWorkerPath), "validate-handler-ms")
			<-profDone
			if err := writeBenchSection(wp50, wp99, np50, np99, load, calls, handshakes); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// profileAPIServer, when WEBHOOK_BENCH_APISERVER_PPROF names a file, writes a CPU
// profile of kube-apiserver (its /debug/pprof/profile, on by default) taken over
// the first WEBHOOK_BENCH_APISERVER_PPROF_SECONDS (default 20) seconds of the creates.
// The returned channel is closed once the profile is written (at once when unset).
func profileAPIServer(ctx context.Context, b *testing.B, s *suite) <-chan struct{} {
	done := make(chan struct{})
	path := os.Getenv("WEBHOOK_BENCH_APISERVER_PPROF")
	if path == "" {
		close(done)
		return done
	}
	secs := os.Getenv("WEBHOOK_BENCH_APISERVER_PPROF_SECONDS")
	if secs == "" {
		secs = "20"
	}
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(done)
		p, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).Timeout(5 * time.Minute).DoRaw(ctx)
		if err != nil {
			b.Errorf("kube-apiserver profile: %v", err)
			return
		}
		if err := os.WriteFile(path, p, 0o644); err != nil {
			b.Error(err)
		}
	}()
	return done
}

// webhookNames maps the Worker webhook paths to their names in
// config/webhook/manifests.yaml, as the API server's metrics label them.
var webhookNames = map[string]string{
	MutateWorkerPath:   "mworker.fleet.workerd-operator.io",
	ValidateWorkerPath: "vworker.fleet.workerd-operator.io",
}

// callTimes holds, per Worker webhook path, the sum (seconds) and count of the API
// server's webhook calls (apiserver_admission_webhook_admission_duration_seconds: the
// whole call as the API server sees it, request building, TLS, HTTP and the webhook
// server) and of the webhook server's handling (controller-runtime's
// controller_runtime_webhook_latency_seconds: reading the request, decoding, the
// handler, writing the response).
type callTimes struct {
	apiSum, apiCount, hSum, hCount map[string]float64
}

func (c callTimes) minus(o callTimes) callTimes {
	d := callTimes{map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}}
	for path := range webhookNames {
		d.apiSum[path] = c.apiSum[path] - o.apiSum[path]
		d.apiCount[path] = c.apiCount[path] - o.apiCount[path]
		d.hSum[path] = c.hSum[path] - o.hSum[path]
		d.hCount[path] = c.hCount[path] - o.hCount[path]
	}
	return d
}

func meanMs(sum, count float64) float64 {
	if count == 0 {
		return 0
	}
	return 1000 * sum / count
}

func (c callTimes) apiserverMs(path string) float64 { return meanMs(c.apiSum[path], c.apiCount[path]) }
func (c callTimes) handlerMs(path string) float64   { return meanMs(c.hSum[path], c.hCount[path]) }

// sampleCallTimes reads the API server's /metrics and this process's controller-runtime
// metrics registry.
func sampleCallTimes(ctx context.Context, s *suite) (callTimes, error) {
	c := callTimes{map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}}
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return c, err
	}
	text, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return c, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.Contains(f[0], `operation="CREATE"`) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		for path, name := range webhookNames {
			if !strings.Contains(f[0], `name="`+name+`"`) {
				continue
			}
			switch {
			case strings.HasPrefix(f[0], metric+"_sum{"):
				c.apiSum[path] += v
			case strings.HasPrefix(f[0], metric+"_count{"):
				c.apiCount[path] += v
			}
		}
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return c, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_webhook_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if _, ok := webhookNames[l.GetValue()]; ok && l.GetName() == "webhook" {
					c.hSum[l.GetValue()] += m.GetHistogram().GetSampleSum()
					c.hCount[l.GetValue()] += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return c, nil
}

// loadAverage returns the 1-minute load average of /proc/loadavg, "unknown" elsewhere.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct returns the p-th percentile of ds (nearest rank: the smallest value with at
// least p % of ds at or below it).
func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(float64(len(s))*p/100)) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

const (
	benchBegin = "<!-- BEGIN admission-webhooks (internal/webhook BenchmarkAdmissionRoundTrip; generated) -->"
	benchEnd   = "<!-- END admission-webhooks -->"
)

// writeBenchSection replaces this benchmark's section of docs/benchmarks.md (creating
// the file or appending the section when missing) and keeps the other sections.
func writeBenchSection(wp50, wp99, np50, np99 time.Duration, load string, calls callTimes, handshakes int64) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	path := filepath.Join(root, "docs", "benchmarks.md")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	host, _ := os.Hostname()
	section := fmt.Sprintf(`%s
## Admission webhooks

Round trip of `+"`client.Create`"+` of a Worker through a real kube-apiserver %s (envtest) with
the operator's webhooks served in-process over TLS (HTTP/1.1, as the manager serves them) on
127.0.0.1: %d creates with the webhooks
(namespace bench-webhook: add-only defaulting, then validation; each Worker lacks
spec.limits and spec.replicas, so the mutating webhook's matchCondition calls it) and %d
without (namespace bench-nowebhook, excluded by the namespace selector), interleaved in one run
after one unmeasured create per namespace (the API server's first Worker create takes about 2 s
with or without webhooks).
`+"`go test ./internal/webhook -run '^$' -bench AdmissionRoundTrip -benchtime 1x`"+`

| | p50 | p99 |
|---|---:|---:|
| with webhooks | %.2f ms | %.2f ms |
| without webhooks | %.2f ms | %.2f ms |
| overhead | %.2f ms | %.2f ms |
| ratio | %.2f× | %.2f× |

Where the time goes (means over the same creates): the API server's call of each webhook
(`+"`apiserver_admission_webhook_admission_duration_seconds`"+`: request building, TLS, HTTP
and the webhook server) against the webhook server's own handling of it
(`+"`controller_runtime_webhook_latency_seconds`"+`: reading and decoding the AdmissionReview,
the handler, writing the response); the difference is the API server's own work on the
call (building the AdmissionReview, applying the patch), transport and waiting for a CPU.
The webhook server accepted %d TLS handshake(s) during the %d creates with webhooks (only a
call that opens a new connection pays one; the API server keeps its connection alive).

| webhook | API server's call | webhook server's handling |
|---|---:|---:|
| mutating (add-only defaulter) | %.2f ms | %.2f ms |
| validating | %.2f ms | %.2f ms |

Aim: p99 overhead ≤ 5 ms. Measured %s on %s (GOMAXPROCS %d; 1-minute load average %s when the run
started; kube-apiserver, etcd, the client and the webhook server share the machine's cores, and
other builds may too, so absolute figures are noisy; the ratio is the comparable number).
%s
`, benchBegin, testenv.KubernetesVersion, benchCreates, benchCreates,
		ms(wp50), ms(wp99), ms(np50), ms(np99), ms(wp50-np50), ms(wp99-np99),
		float64(wp50)/float64(np50), float64(wp99)/float64(np99), handshakes, benchCreates,
		calls.apiserverMs(MutateWorkerPath), calls.handlerMs(MutateWorkerPath),
		calls.apiserverMs(ValidateWorkerPath), calls.handlerMs(ValidateWorkerPath),
		time.Now().UTC().Format(time.RFC3339), host, runtime.GOMAXPROCS(0), load, benchEnd)
	text := string(old)
	if text == "" {
		text = "# Benchmarks\n\nEach section is written by the benchmark it names.\n\n"
	}
	if i, j := strings.Index(text, benchBegin), strings.Index(text, benchEnd); i >= 0 && j > i {
		text = text[:i] + strings.TrimSuffix(section, "\n") + text[j+len(benchEnd):]
	} else {
		if !strings.HasSuffix(text, "\n\n") {
			text = strings.TrimRight(text, "\n") + "\n\n"
		}
		text += section
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
