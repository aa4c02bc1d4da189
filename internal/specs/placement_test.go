package specs

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// placedSet is one set of pods the operator builds, as the placement tests see it.
type placedSet struct {
	selector *metav1.LabelSelector
	pod      corev1.PodTemplateSpec
	owners   []metav1.OwnerReference
	pdb      *policyv1.PodDisruptionBudget // nil for a Deployment: Worker pods get none
	// spreadKeys are the matchLabelKeys the default spread must carry.
	spreadKeys []string
}

// placedSets builds every kind of set from Worker w: its Deployment, a Durable Object
// namespace's shards, a Workflow engine and a KV host.
func placedSets(t *testing.T, w *fleetv1alpha1.Worker) map[string]placedSet {
	t.Helper()
	out := &render.Output{Version: "v"}
	opts := DefaultOptions()
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: "uid-2"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room", Shards: ptr.To[int32](3)}}
	wf := &fleetv1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", UID: "uid-3"},
		Spec: fleetv1alpha1.WorkflowSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Orders"}}
	engine, err := BuildWorkflowChildren(wf, w, out, api.FileConfig{}, "inputs", opts)
	if err != nil {
		t.Fatal(err)
	}
	kv := &fleetv1alpha1.KVNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "todos", UID: "uid-4"}}
	host := render.DataHost{Kind: render.DataKV, Namespace: "ns", Name: "todos"}
	sets := map[string]ShardSet{
		"shards": BuildDONSChildren(d, w, out, "inputs", opts),
		"engine": engine,
		"kv":     BuildDataStoreChildren(kv, host, w, nil, StoreBackup{}, out, "inputs", opts),
	}
	placed := map[string]placedSet{}
	for kind, s := range sets {
		placed[kind] = placedSet{selector: s.StatefulSet.Spec.Selector, pod: s.StatefulSet.Spec.Template,
			owners: s.StatefulSet.OwnerReferences, pdb: s.PodDisruptionBudget}
	}
	dep := BuildWorkerChildren(w, out, "inputs", opts).Deployment
	placed["worker"] = placedSet{selector: dep.Spec.Selector, pod: dep.Spec.Template, owners: dep.OwnerReferences,
		spreadKeys: []string{"pod-template-hash"}}
	return placed
}

// By default every set spreads its own pods over nodes, as a preference:
// https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
// topologyKey kubernetes.io/hostname makes each node a domain; maxSkew 1 is the
// smallest allowed skew; whenUnsatisfiable ScheduleAnyway "tells the scheduler to still
// schedule it while prioritizing nodes that minimize the skew" (a one-node cluster
// still runs every pod); labelSelector finds the pods counted, which must be the set's
// own. A Deployment adds matchLabelKeys [pod-template-hash] (the docs' example for
// rolling updates); a StatefulSet, which replaces pods in place, counts them all.
func TestDefaultSpreadOverNodes(t *testing.T) {
	for kind, s := range placedSets(t, fixtureWorker()) {
		t.Run(kind, func(t *testing.T) {
			tsc := s.pod.Spec.TopologySpreadConstraints
			if len(tsc) != 1 {
				t.Fatalf("topologySpreadConstraints %+v, want one", tsc)
			}
			c := tsc[0]
			if c.MaxSkew != 1 || c.TopologyKey != "kubernetes.io/hostname" || c.WhenUnsatisfiable != "ScheduleAnyway" {
				t.Errorf("constraint %+v, want maxSkew 1, topologyKey kubernetes.io/hostname, whenUnsatisfiable ScheduleAnyway", c)
			}
			if !reflect.DeepEqual(c.LabelSelector, s.selector) {
				t.Errorf("labelSelector %v, want the set's selector %v", c.LabelSelector, s.selector)
			}
			if !labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(labels.Set(s.pod.Labels)) {
				t.Errorf("labelSelector %v does not select the set's pods %v", c.LabelSelector, s.pod.Labels)
			}
			if len(c.MatchLabelKeys) != len(s.spreadKeys) || (len(c.MatchLabelKeys) > 0 && !reflect.DeepEqual(c.MatchLabelKeys, s.spreadKeys)) {
				t.Errorf("matchLabelKeys %q, want %q", c.MatchLabelKeys, s.spreadKeys)
			}
			if c.MinDomains != nil || c.NodeAffinityPolicy != nil || c.NodeTaintsPolicy != nil {
				t.Errorf("constraint %+v sets fields beyond the default", c)
			}
		})
	}
}

// The Worker's spec.pod.topologySpreadConstraints replace the default in every set:
// the user's list is used as it is, with nothing added.
func TestUserSpreadWins(t *testing.T) {
	user := []corev1.TopologySpreadConstraint{{
		MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "chat"}},
	}}
	cases := []struct {
		name string
		tsc  []corev1.TopologySpreadConstraint
		want int // constraints expected in every set
	}{
		{"no spec.pod: the default", nil, 1},
		{"empty list: the default", []corev1.TopologySpreadConstraint{}, 1},
		{"the user's list", user, len(user)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
				if tc.tsc != nil {
					w.Spec.Pod = &fleetv1alpha1.PodOverrides{TopologySpreadConstraints: tc.tsc}
				}
			})
			for kind, s := range placedSets(t, w) {
				got := s.pod.Spec.TopologySpreadConstraints
				if len(got) != tc.want {
					t.Errorf("%s: topologySpreadConstraints %+v, want %d", kind, got, tc.want)
				}
				if len(tc.tsc) > 0 && !reflect.DeepEqual(got, tc.tsc) {
					t.Errorf("%s: topologySpreadConstraints %+v, want the user's %+v", kind, got, tc.tsc)
				}
			}
		})
	}
}

// Every StatefulSet gets a PodDisruptionBudget over its pods, owned like the set:
// https://kubernetes.io/docs/tasks/run-application/configure-pdb/
// maxUnavailable 1 lets a drain evict one pod at a time (and, unlike minAvailable 1,
// still evicts the only pod of a one-pod set); selector is the set's own (the docs use
// the controller's selector); unhealthyPodEvictionPolicy
// AlwaysAllow lets a drain evict a running pod that is not Ready even when the budget
// is spent.
func TestStatefulSetDisruptionBudget(t *testing.T) {
	for kind, s := range placedSets(t, fixtureWorker()) {
		if kind == "worker" {
			if s.pdb != nil {
				t.Errorf("worker: unexpected PodDisruptionBudget")
			}
			continue
		}
		t.Run(kind, func(t *testing.T) {
			p := s.pdb
			if p == nil {
				t.Fatal("no PodDisruptionBudget")
			}
			if p.APIVersion != "policy/v1" || p.Kind != "PodDisruptionBudget" {
				t.Errorf("type %s %s, want policy/v1 PodDisruptionBudget", p.APIVersion, p.Kind)
			}
			if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt32(1) || p.Spec.MinAvailable != nil {
				t.Errorf("maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
			}
			if !reflect.DeepEqual(p.Spec.Selector, s.selector) {
				t.Errorf("selector %v, want the StatefulSet's %v", p.Spec.Selector, s.selector)
			}
			if pol := p.Spec.UnhealthyPodEvictionPolicy; pol == nil || *pol != "AlwaysAllow" {
				t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", pol)
			}
			if !reflect.DeepEqual(p.OwnerReferences, s.owners) || len(p.OwnerReferences) != 1 || !*p.OwnerReferences[0].Controller {
				t.Errorf("ownerReferences %+v, want the StatefulSet's %+v", p.OwnerReferences, s.owners)
			}
		})
	}
}
