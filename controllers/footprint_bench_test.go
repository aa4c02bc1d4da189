package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkFleetFootprint (docs/scaling.md, "On paper"): what one Worker costs the
// control plane once reconciled: the objects the operator makes for it, their bytes as
// stored (JSON, the API server's encoding here), and the watch events the API server
// sent while n Workers were created and reconciled (apiserver_watch_events_total).
// envtest runs no kube-controller-manager: ReplicaSets, Pods and EndpointSlices come on
// top on a real cluster.
//
//	go test ./controllers -run '^$' -bench FleetFootprint -benchtime 1x
func BenchmarkFleetFootprint(b *testing.B) {
	const n = 200
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := newNamespace(b)
		before := watchEvents(b)
		start := time.Now()
		for j := 0; j < n; j++ {
			if err := k8sClient.Create(ctx, workerFixture(ns, fmt.Sprintf("w%04d", j))); err != nil {
				b.Fatal(err)
			}
		}
		for {
			deps := &appsv1.DeploymentList{}
			if err := k8sClient.List(ctx, deps, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			if len(deps.Items) == n {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // the status writes that follow
		elapsed := time.Since(start)
		events := watchEvents(b) - before
		objs, size := 0, 0
		for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{},
			&networkingv1.NetworkPolicyList{}, &corev1.ServiceAccountList{}, &corev1.SecretList{}} {
			if err := k8sClient.List(ctx, l, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			raw, _ := json.Marshal(l)
			var items struct{ Items []json.RawMessage }
			_ = json.Unmarshal(raw, &items)
			for _, it := range items.Items {
				objs++
				size += len(it)
			}
		}
		b.ReportMetric(float64(objs)/n, "objects/worker")
		b.ReportMetric(float64(size)/n, "bytes/worker")
		b.ReportMetric(float64(events)/n, "watch-events/worker")
		b.ReportMetric(elapsed.Seconds(), "s/200-workers")
	}
}

// watchEvents is the API server's apiserver_watch_events_total, summed over kinds.
func watchEvents(b *testing.B) float64 {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_watch_events_total{") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}
