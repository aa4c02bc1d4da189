package controller_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// BenchmarkReconcileThousandWorkers (issue 3, Done means 5): 1,000 Workers exist on a
// fresh API server before the manager starts; the figure is the time from manager start
// until every Deployment exists, and the process's peak RSS (VmHWM, an upper bound of
// the manager's: the test's own client lives in the same process).
//
//	make bench  (or: go test ./controllers -run '^$' -bench ThousandWorkers -benchtime 1x)
func BenchmarkReconcileThousandWorkers(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		env, err := testenv.NewEnvironment()
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := testenv.StartEnv(env)
		if err != nil {
			b.Fatal(err)
		}
		// As the manager's own config (ctrl.GetConfig): no client-side rate limit, the
		// API server's priority and fairness applies.
		cfg.QPS = -1
		c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
		if err := c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < n; j++ {
			if err := c.Create(ctx, workerFixture("bench", fmt.Sprintf("w%04d", j))); err != nil {
				b.Fatal(err)
			}
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
			Cache: controller.CacheOptions(nil, ""),
			// The suite's own manager (TestMain) registered the same controller names.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := controller.SetupAll(mgr, specs.DefaultOptions(), cronschedule.DispatcherOptions{}, nil, 0); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		go func() { _ = mgr.Start(ctx) }()
		for {
			deps := &appsv1.DeploymentList{}
			if err := c.List(ctx, deps, client.InNamespace("bench")); err != nil {
				b.Fatal(err)
			}
			if len(deps.Items) == n {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(elapsed.Seconds(), "s/1000-workers")
		b.ReportMetric(float64(peakRSSKiB())/1024, "peak-RSS-MiB")
		cancel()
		_ = env.Stop()
	}
}

// peakRSSKiB is VmHWM from /proc/self/status.
func peakRSSKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			var kib int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(s.Text(), "VmHWM:")), "%d", &kib)
			return kib
		}
	}
	return 0
}
