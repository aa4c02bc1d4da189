package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// The release a cluster upgrades from (docs/upgrades.md, "Supported upgrade path"): its
// tree comes from this clone's history, its images are built from it here.
const (
	previousRelease = "v0.1.0"
	previousCommit  = "a3e9deda7951ff51c8102b80febea7a2ccc99f17"
)

// previousOperatorImage is the previous release's operator image, as its chart names it
// (image.tag).
const previousOperatorImage = podcontract.ImageRepository + "/workerd-operator:" + previousRelease

// Where buildPrevious leaves the previous release, under the run's directory.
const (
	previousArchive = "operator-previous.tar" // in <dir>/images
	previousDir     = "previous"              // its tree (src), install.yaml, or skip
)

// upgradeEnv set to "skip" runs no upgrade (a clone without the previous release's
// commit); TestUpgradeFromPreviousRelease then skips, saying so.
const upgradeEnv = "WORKERD_OPERATOR_UPGRADE_TEST"

// buildPrevious writes the previous release's tree, its operator image and its install
// bundle under dir, before the namespaces are entered (go needs the module proxy). A
// clone without the release's commit fails here, naming the cause and the way out.
func buildPrevious(root, dir string) error {
	pd := filepath.Join(dir, previousDir)
	src := filepath.Join(pd, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if os.Getenv(upgradeEnv) == "skip" {
		return os.WriteFile(filepath.Join(pd, "skip"), []byte(upgradeEnv+"=skip: no upgrade from "+previousRelease), 0o644)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", previousCommit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("the upgrade test builds the previous release %s from commit %s of this clone's history, which git cannot read (%v %s): "+
			"clone with the full history (not --depth), or set %s=skip to run the suite without it (docs/upgrades.md)",
			previousRelease, previousCommit[:12], err, strings.TrimSpace(string(out)), upgradeEnv)
	}
	extract := exec.Command("bash", "-o", "pipefail", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "-", root, previousCommit, src)
	if out, err := extract.CombinedOutput(); err != nil {
		return fmt.Errorf("extract %s: %v\n%s", previousRelease, err, out)
	}
	if err := ociimage.OperatorImage(src, filepath.Join(dir, "images", previousArchive), previousOperatorImage); err != nil {
		return fmt.Errorf("%s operator image: %w", previousRelease, err)
	}
	cmd := exec.Command("go", "run", "./hack/build-installer", "--img", previousOperatorImage)
	cmd.Dir, cmd.Stderr = src, os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s install bundle: %w", previousRelease, err)
	}
	return os.WriteFile(filepath.Join(pd, "install.yaml"), b, 0o644)
}

// previousSkipped is why no upgrade runs here, or "".
func previousSkipped() string {
	b, err := os.ReadFile(filepath.Join(runDir, previousDir, "skip"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func previousSrc() string { return filepath.Join(runDir, previousDir, "src") }

// upgrade is one upgrade of the operator from the previous release, as
// TestUpgradeFromPreviousRelease reports it.
type upgrade struct {
	how   string
	urls  []urlLoad
	moved []string // the workloads that ran the previous release's sidecar
	lost  []string // fields of the samples, or of the current CRDs, not in the cluster
	took  time.Duration
}

// urlLoad is what one URL's client saw during an upgrade.
type urlLoad struct {
	url              string
	requests, failed int64
	failures         []string
	slowest          time.Duration
}

var upgrades []upgrade

// upgradeCheck watches what an upgrade must keep: requests to a Worker, to a Durable
// Object and to a workflow instance all answered, and every field of the samples.
type upgradeCheck struct {
	how     string
	start   time.Time
	samples []*unstructured.Unstructured
	before  []*unstructured.Unstructured
	moved   []string
	urls    []string
	loads   []*load
}

// upgradeClient waits as long as a call to a Durable Object or a workflow instance may
// wait for its shard or engine pod being replaced (docs/durable-objects.md, "Rollouts:
// calls wait for an owner being replaced"), as the e2e rollout tests' client does.
var upgradeClient = &http.Client{Timeout: 150 * time.Second}

func startUpgradeCheck(ctx context.Context, how string, samples []*unstructured.Unstructured) (*upgradeCheck, error) {
	u := &upgradeCheck{how: how, start: time.Now(), samples: samples}
	var err error
	if u.before, err = cluster.getAll(ctx, samples); err != nil {
		return nil, err
	}
	if u.moved, err = workloadsOn(ctx, previousOperatorImage); err != nil {
		return nil, err
	}
	if len(u.moved) == 0 {
		return nil, fmt.Errorf("no workload in %s runs %s before the upgrade", sampleNS, previousOperatorImage)
	}
	hello, err := serviceAddr(ctx, "hello")
	if err != nil {
		return nil, err
	}
	chat, err := serviceAddr(ctx, "chat")
	if err != nil {
		return nil, err
	}
	shop, err := serviceAddr(ctx, "shop")
	if err != nil {
		return nil, err
	}
	if _, err := post(chat+"/rooms/upgrade/messages", `{"user":"ada","text":"before the upgrade"}`, 201); err != nil {
		return nil, err
	}
	order, err := post(shop+"/orders", `{"items":["book"]}`, 201)
	if err != nil {
		return nil, err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(order, &created); err != nil || created.ID == "" {
		return nil, fmt.Errorf("POST /orders answered %q (%v)", order, err)
	}
	u.urls = []string{hello + "/upgrade", chat + "/rooms/upgrade/messages", shop + "/orders/" + created.ID}
	for _, url := range u.urls {
		u.loads = append(u.loads, startLoad(upgradeClient, url, 1, 50*time.Millisecond))
	}
	return u, nil
}

// finish stops the requests and records what the upgrade kept.
func (u *upgradeCheck) finish(ctx context.Context) error {
	time.Sleep(2 * time.Second)
	r := upgrade{how: u.how, took: time.Since(u.start), moved: u.moved}
	for i, l := range u.loads {
		l.stop()
		r.urls = append(r.urls, urlLoad{url: u.urls[i], requests: l.ok.Load() + l.failed.Load(), failed: l.failed.Load(),
			failures: l.failures, slowest: time.Duration(l.slowest.Load())})
	}
	after, err := cluster.getAll(ctx, u.samples)
	if err != nil {
		return err
	}
	for i, b := range u.before {
		name := b.GetKind() + " " + b.GetName()
		for _, part := range []string{"spec", "metadata.labels", "metadata.annotations"} {
			path := strings.Split(part, ".")
			old, _, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
			cur, _, _ := unstructured.NestedFieldNoCopy(after[i].Object, path...)
			r.lost = append(r.lost, lostFields(name+" "+part, old, cur)...)
		}
	}
	lost, err := crdsNotCurrent(ctx)
	if err != nil {
		return err
	}
	r.lost = append(r.lost, lost...)
	upgrades = append(upgrades, r)
	return nil
}

// crdsNotCurrent lists what the current install bundle's CRDs declare (their versions,
// schemas, columns) and the cluster's CRDs lack: the upgrade must have replaced them.
func crdsNotCurrent(ctx context.Context) ([]string, error) {
	var crds []*unstructured.Unstructured
	for _, o := range bundle {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	live, err := cluster.getAll(ctx, crds)
	if err != nil {
		return nil, err
	}
	var lost []string
	for i, c := range crds {
		want, _, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "versions")
		got, _, _ := unstructured.NestedFieldNoCopy(live[i].Object, "spec", "versions")
		lost = append(lost, lostFields("CRD "+c.GetName()+" spec.versions", want, got)...)
	}
	return lost, nil
}

// workloadsOn lists the Deployments and StatefulSets in the samples' namespace whose pod
// template, and the pods there, that run image.
func workloadsOn(ctx context.Context, image string) ([]string, error) {
	var on []string
	uses := func(kind, name string, spec corev1.PodSpec) {
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if c.Image == image {
				on = append(on, kind+" "+name)
				return
			}
		}
	}
	deps, err := cluster.client.AppsV1().Deployments(sampleNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, d := range deps.Items {
		uses("Deployment", d.Name, d.Spec.Template.Spec)
	}
	sts, err := cluster.client.AppsV1().StatefulSets(sampleNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range sts.Items {
		uses("StatefulSet", s.Name, s.Spec.Template.Spec)
	}
	pods, err := cluster.client.CoreV1().Pods(sampleNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		uses("Pod", p.Name, p.Spec)
	}
	return on, nil
}

// lostFields lists the paths under old whose value cur does not keep. Fields cur adds
// (defaults of the new release, maps that were absent) are not lost.
func lostFields(path string, old, cur any) []string {
	switch o := old.(type) {
	case nil:
		return nil
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, was %v", path, cur, old)}
		}
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lost []string
		for _, k := range keys {
			lost = append(lost, lostFields(path+"."+k, o[k], c[k])...)
		}
		return lost
	case []any:
		c, ok := cur.([]any)
		if !ok || len(c) != len(o) {
			return []string{fmt.Sprintf("%s: %v, was %v", path, cur, old)}
		}
		var lost []string
		for i := range o {
			lost = append(lost, lostFields(fmt.Sprintf("%s[%d]", path, i), o[i], c[i])...)
		}
		return lost
	}
	if !reflect.DeepEqual(number(old), number(cur)) {
		return []string{fmt.Sprintf("%s: %v, was %v", path, cur, old)}
	}
	return nil
}

// number makes the numbers of YAML decoded as JSON (float64) and of the API's answers
// (int64) compare equal.
func number(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return v
}

// TestUpgradeFromPreviousRelease reports the two upgrades the suite's set-up ran
// (install): the previous release's install bundle, then the current one applied over it;
// and the previous release's chart, then `helm upgrade` to the current chart. Each ran
// with the samples applied by the previous release and requests to a Worker, a Durable
// Object and a workflow instance all along, until no workload ran the previous release's
// sidecar. Done: no request failed, every sample Ready (the set-up waited for it), no
// field of a sample lost, the current CRDs in the cluster, v1alpha1 the stored version.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	requireNode(t)
	if why := previousSkipped(); why != "" {
		t.Skip(why)
	}
	storedVersions(t)
	if len(upgrades) != 2 {
		t.Fatalf("%d upgrades ran, want 2 (bundle, helm)", len(upgrades))
	}
	for _, u := range upgrades {
		t.Logf("%s, in %s: %d workloads moved off %s (%s)", u.how, u.took.Round(time.Second), len(u.moved), previousOperatorImage, strings.Join(u.moved, ", "))
		for _, l := range u.urls {
			t.Logf("  %s: %d requests, %d failed, slowest answer %s", l.url, l.requests, l.failed, l.slowest.Round(time.Millisecond))
			if l.requests < 50 {
				t.Errorf("%s: only %d requests to %s during the upgrade", u.how, l.requests, l.url)
			}
			if l.failed > 0 {
				t.Errorf("%s: %d of %d requests to %s failed; first:\n  %s", u.how, l.failed, l.requests, l.url, strings.Join(l.failures, "\n  "))
			}
		}
		if len(u.lost) > 0 {
			t.Errorf("%s: not in the cluster after the upgrade:\n  %s", u.how, strings.Join(u.lost, "\n  "))
		}
	}
}

// storedVersions: every fleet CRD still stores only v1alpha1 (the releases share it; the
// upgrade added fields and changed none, so no object needs converting).
func storedVersions(t *testing.T) {
	t.Helper()
	dyn, _, err := cluster.dynamic()
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, kind := range []string{"workers", "durableobjectnamespaces", "workflows", "cronschedules"} {
		crd, err := dyn.Resource(crds).Get(context.Background(), kind+"."+fleetGroup, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
		if !reflect.DeepEqual(stored, []string{"v1alpha1"}) {
			t.Errorf("CRD %s: status.storedVersions %v, want [v1alpha1]", crd.GetName(), stored)
		}
	}
}

func TestLostFields(t *testing.T) {
	old := map[string]any{"a": "x", "b": []any{map[string]any{"n": int64(1)}}, "c": map[string]any{"d": true}}
	if got := lostFields("metadata.labels", nil, map[string]any{"added": "x"}); got != nil {
		t.Errorf("a map that was absent: lost %q", got)
	}
	if got := lostFields("spec.replicas", float64(2), int64(2)); got != nil {
		t.Errorf("2 as YAML's float64 and the API's int64: lost %q", got)
	}
	for _, tc := range []struct {
		cur  map[string]any
		lost int
	}{
		{map[string]any{"a": "x", "b": []any{map[string]any{"n": int64(1), "new": "default"}}, "c": map[string]any{"d": true}, "e": 1}, 0},
		{map[string]any{"b": []any{map[string]any{"n": int64(1)}}, "c": map[string]any{"d": true}}, 1},
		{map[string]any{"a": "x", "b": []any{map[string]any{"n": int64(2)}}, "c": map[string]any{}}, 2},
		{map[string]any{"a": "x", "b": []any{}, "c": map[string]any{"d": true}}, 1},
	} {
		if got := lostFields("spec", old, tc.cur); len(got) != tc.lost {
			t.Errorf("lostFields(%v) = %q, want %d", tc.cur, got, tc.lost)
		}
	}
}
