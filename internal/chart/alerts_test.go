package chart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// alertsTestFile holds promtool's unit tests of the rules (recorded series in, alerts
// expected out).
const alertsTestFile = "testdata/alerts.test.yaml"

// testRunbookURL is the runbook base the tests render the rules with.
const testRunbookURL = "https://runbooks.test/alerts.md"

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// renderedRules renders the chart with alerts on and returns its PrometheusRule's
// groups as a Prometheus rule file.
func renderedRules(t *testing.T) []byte {
	t.Helper()
	objs := render(t, map[string]any{"alerts": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}, "runbookURL": testRunbookURL}})
	pr := mustFind(t, objs, "PrometheusRule", release+"-alerts")
	if pr.GetNamespace() != namespace || pr.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule in %q labelled %v", pr.GetNamespace(), pr.GetLabels())
	}
	b, err := yaml.Marshal(map[string]any{"groups": nested(t, pr, "spec", "groups")})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAlertRules: the chart's alert rules pass `promtool check rules` and the unit tests
// of testdata/alerts.test.yaml (Prometheus' own rule engine evaluating them on recorded
// series): each alert fires on its condition and stays silent in a healthy hour.
func TestAlertRules(t *testing.T) {
	promtool, err := toolchain.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), renderedRules(t), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type alertTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

var anchorRE = regexp.MustCompile(`(?m)^### (Workerd[A-Za-z]+)$`)

// TestAlertRulesCovered: every alert has a firing case and a silent case in the
// healthy hour, a runbook section in docs/alerts.md that its runbook_url names, a
// severity, and selects only series the product exports, by labels they have.
func TestAlertRulesCovered(t *testing.T) {
	var rules ruleGroups
	if err := yaml.Unmarshal(renderedRules(t), &rules); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTests
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else if tc.Name == "a healthy hour" {
				silent[a.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range anchorRE.FindAllStringSubmatch(string(doc), -1) {
		sections = append(sections, m[1])
	}
	series := exportedSeries(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("%s: firing case %v, silent in the healthy hour %v (%s)", r.Alert, fires[r.Alert], silent[r.Alert], alertsTestFile)
			}
			if !slices.Contains(sections, r.Alert) {
				t.Errorf("%s: no section \"### %s\" in docs/alerts.md", r.Alert, r.Alert)
			}
			if want := testRunbookURL + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			checkSelectors(t, r.Alert, r.Expr, series)
		}
	}
	if n < 9 {
		t.Errorf("%d alerts; want the Worker, store, backup, workflow and cron ones", n)
	}
}

// checkSelectors: expr parses and selects only exported series by their labels. It
// returns the series names expr selects.
func checkSelectors(t *testing.T, where, expr string, series map[string][]string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		lbls, known := series[vs.Name]
		if !known {
			t.Errorf("%s: series %q is not exported by the product", where, vs.Name)
			return nil
		}
		names = append(names, vs.Name)
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName && !slices.Contains(lbls, m.Name) {
				t.Errorf("%s: %s has no label %q (labels %v)", where, vs.Name, m.Name, lbls)
			}
		}
		return nil
	})
	return names
}
