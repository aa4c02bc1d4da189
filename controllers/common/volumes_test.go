package common

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A volume is pinned to one node when its required node affinity has one term with
// kubernetes.io/hostname In one value: the shape of a local PersistentVolume
// (https://kubernetes.io/docs/concepts/storage/volumes/#local) and of
// local-path-provisioner's. Anything the scheduler could satisfy on another node is not.
func TestPinnedNode(t *testing.T) {
	host := func(op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: op, Values: values}
	}
	zone := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}
	cases := []struct {
		name  string
		terms [][]corev1.NodeSelectorRequirement // nil: no nodeAffinity
		want  string
	}{
		{"local volume", [][]corev1.NodeSelectorRequirement{{host(corev1.NodeSelectorOpIn, "example-node")}}, "example-node"},
		{"and a zone", [][]corev1.NodeSelectorRequirement{{zone, host(corev1.NodeSelectorOpIn, "example-node")}}, "example-node"},
		{"no node affinity", nil, ""},
		{"a zone only", [][]corev1.NodeSelectorRequirement{{zone}}, ""},
		{"two nodes", [][]corev1.NodeSelectorRequirement{{host(corev1.NodeSelectorOpIn, "a", "b")}}, ""},
		{"two terms", [][]corev1.NodeSelectorRequirement{{host(corev1.NodeSelectorOpIn, "a")}, {host(corev1.NodeSelectorOpIn, "b")}}, ""},
		{"NotIn", [][]corev1.NodeSelectorRequirement{{host(corev1.NodeSelectorOpNotIn, "a")}}, ""},
	}
	for _, tc := range cases {
		pv := &corev1.PersistentVolume{}
		if tc.terms != nil {
			sel := &corev1.NodeSelector{}
			for _, exprs := range tc.terms {
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
			}
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: sel}
		}
		if got := pinnedNode(pv); got != tc.want {
			t.Errorf("%s: pinned to %q, want %q", tc.name, got, tc.want)
		}
	}
}
