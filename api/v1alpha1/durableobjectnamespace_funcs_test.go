package v1alpha1_test

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// The unsealed-shards annotation names shards of the old set (docs/scaling.md).
func TestUnsealedShards(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    []int32
		wantErr string
	}{
		{value: "", want: nil},
		{value: "3", want: []int32{3}},
		{value: " 5, 1,1 ", want: []int32{1, 5}},
		{value: "8", wantErr: `"8" is not a shard of the old set (0 to 7)`},
		{value: "1,x", wantErr: `"x" is not a shard`},
		{value: "-1", wantErr: `"-1" is not a shard`},
	} {
		d := &v1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationUnsealedShards: tc.value}}}
		got, err := d.UnsealedShards(8)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), v1alpha1.AnnotationUnsealedShards) {
				t.Errorf("%q: %v, want an error naming the annotation and %s", tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
		}
	}
}
