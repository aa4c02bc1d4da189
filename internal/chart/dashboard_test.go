package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/chart"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
)

// DashboardFile is the Grafana dashboard in the chart.
const dashboardFile = "files/dashboards/workerd.json"

// targetLabels are the labels Prometheus adds to every series of a PodMonitor or
// ServiceMonitor target (https://prometheus-operator.dev/docs/developer/scrapeconfig/).
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "job", "instance", "service"}

// collecting is a prometheus.Registerer that keeps what is registered.
type collecting struct{ cs []prometheus.Collector }

func (c *collecting) Register(x prometheus.Collector) error   { c.cs = append(c.cs, x); return nil }
func (c *collecting) MustRegister(xs ...prometheus.Collector) { c.cs = append(c.cs, xs...) }
func (c *collecting) Unregister(prometheus.Collector) bool    { return false }

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

// exportedSeries maps every series name the product exports (the sidecar's Worker,
// channel, backup and workflow engine series, the manager's cron and shard series; a
// histogram's _bucket, _sum and _count) to its labels.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	reg := &collecting{}
	telemetry.NewMetrics(reg, 0)
	channels.NewMetrics(reg)
	reg.MustRegister(cronschedule.Collectors()...)
	reg.MustRegister(&common.ShardsCollector{})
	reg.MustRegister((&backup.Replicator{}).Collectors()...)
	reg.MustRegister(engineCollectors(t)...)
	out := map[string][]string{}
	for _, c := range reg.cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			lbls := append(strings.Split(m[2], ","), targetLabels...)
			switch c.(type) {
			case *prometheus.HistogramVec, prometheus.Histogram:
				out[m[1]+"_bucket"] = append(lbls, "le")
				out[m[1]+"_sum"], out[m[1]+"_count"] = lbls, lbls
			default:
				out[m[1]] = lbls
			}
		}
	}
	return out
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVars are Grafana's built-in interval variables, replaced as Grafana does
// before the query reaches Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m")

var labelValuesRE = regexp.MustCompile(`^label_values\((.+), *([a-z_]+)\)$`)

// queries are the dashboard's PromQL expressions by where they stand; a template
// variable's label_values(selector, label) contributes its selector.
func (d *dashboard) queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Query)
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

// TestDashboardQueries: every query of the chart's Grafana dashboard parses with
// Prometheus' own PromQL parser and selects only series the product exports, matching
// only labels those series have.
func TestDashboardQueries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), chart.Dir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	series := exportedSeries(t)
	qs := d.queries(t)
	if len(qs) < 20 {
		t.Fatalf("dashboard has %d queries, want the per-Worker, DO, workflow, cron and channel panels", len(qs))
	}
	used := map[string]bool{}
	for where, q := range qs {
		for _, name := range checkSelectors(t, where, grafanaVars.Replace(q), series) {
			used[name] = true
		}
	}
	for _, name := range []string{telemetry.InvocationsTotal, telemetry.WallTimeSeconds + "_bucket", telemetry.CPUTimeSeconds + "_bucket",
		telemetry.ExceptionsTotal, telemetry.SubrequestsTotal} {
		if !used[name] {
			t.Errorf("no dashboard query uses %s", name)
		}
	}
}

// checkWorkerdMetrics: the PodMonitor scrapes the sidecar port of the operator's workerd
// pods with the namespace's internal certificate (docs/security-internal-plane.md), the
// dashboard ConfigMap holds the chart's dashboard file, and the NetworkPolicies admit
// the scraper's namespace.
func checkWorkerdMetrics(t *testing.T, objs []*unstructured.Unstructured) {
	pm := find(objs, "PodMonitor", release+"-workerd")
	if pm == nil || pm.GetNamespace() != "apps" || pm.GetLabels()["release"] != "prom" {
		t.Fatalf("PodMonitor %v", pm)
	}
	sel := nested(t, pm, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range specs.WorkerdPodLabels() {
		if sel[k] != v {
			t.Errorf("PodMonitor selects %v, want %v", sel, specs.WorkerdPodLabels())
		}
	}
	ep := nested(t, pm, "spec", "podMetricsEndpoints").([]any)[0].(map[string]any)
	tlsc := ep["tlsConfig"].(map[string]any)
	secret := func(k string) any { return map[string]any{"name": podcontract.InternalTLSSecret, "key": k} }
	if ep["port"] != podcontract.SidecarPortName || ep["scheme"] != "https" || ep["interval"] != "20s" ||
		tlsc["serverName"] != podcontract.InternalServerName("apps") ||
		!reflect.DeepEqual(tlsc["ca"], map[string]any{"secret": secret(podcontract.InternalTLSCA)}) ||
		!reflect.DeepEqual(tlsc["cert"], map[string]any{"secret": secret(podcontract.InternalTLSCert)}) ||
		!reflect.DeepEqual(tlsc["keySecret"], secret(podcontract.InternalTLSKey)) {
		t.Errorf("PodMonitor endpoint %v", ep)
	}
	cm := mustFind(t, objs, "ConfigMap", release+"-dashboard")
	want, err := os.ReadFile(filepath.Join(repoRoot(t), chart.Dir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := nested(t, cm, "data", "workerd.json"); got != strings.TrimRight(string(want), "\n") || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, data differs from %s", cm.GetLabels(), dashboardFile)
	}
	wantArgs(t, objs, "--otlp-endpoint=http://otel.monitoring:4318/v1/traces")
	if !slices.Contains(args(t, objs), "--network-policy-metrics-namespace=monitoring") {
		t.Errorf("args %v", args(t, objs))
	}
}

// engineCollectors are a Workflows engine's series (an engine over an empty store).
func engineCollectors(t *testing.T) []prometheus.Collector {
	t.Helper()
	e, err := workflows.New(workflows.Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e.Collectors()
}
