package controller_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
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

// BenchmarkReconcileThousandWorkers and BenchmarkReconcileTenThousandWorkers: n Workers
// exist on a fresh API server before the manager starts; the figures are the time from
// manager start until every Deployment exists, the process's peak RSS (VmHWM, an upper
// bound of the manager's: the test's own client lives in the same process), and the
// manager's API requests per Worker, reads (GET, LIST, WATCH) and writes apart.
//
//	make bench  (or: go test ./controllers -run '^$' -bench ThousandWorkers -benchtime 1x)
func BenchmarkReconcileThousandWorkers(b *testing.B)    { benchmarkFleet(b, 1000) }
func BenchmarkReconcileTenThousandWorkers(b *testing.B) { benchmarkFleet(b, 10000) }

func benchmarkFleet(b *testing.B, n int) {
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
		createFleet(ctx, b, c, n)
		calls := &requestCounter{}
		mgrCfg := rest.CopyConfig(cfg)
		mgrCfg.Wrap(calls.wrap)
		mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
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
		waitDeployments(ctx, b, c, n)
		elapsed := time.Since(start)
		b.StopTimer()
		writeHeapProfile(b)
		b.ReportMetric(elapsed.Seconds(), fmt.Sprintf("s/%d-workers", n))
		b.ReportMetric(float64(peakRSSKiB())/1024, "peak-RSS-MiB")
		b.ReportMetric(float64(calls.reads.Load())/float64(n), "reads/worker")
		b.ReportMetric(float64(calls.writes.Load())/float64(n), "writes/worker")
		cancel()
		_ = env.Stop()
	}
}

// writeHeapProfile writes the process's in-use heap, after a collection, to the file
// $BENCH_HEAP_PROFILE names (none when unset): what the manager holds once the fleet
// is reconciled (go tool pprof -sample_index=inuse_space).
func writeHeapProfile(b *testing.B) {
	path := os.Getenv("BENCH_HEAP_PROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// createFleet creates n Workers in the namespace "bench", eight at a time.
func createFleet(ctx context.Context, b *testing.B, c client.Client, n int) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(8)
	for j := 0; j < n; j++ {
		g.Go(func() error { return c.Create(ctx, workerFixture("bench", fmt.Sprintf("w%05d", j))) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// waitDeployments waits until n Deployments exist in "bench", listing their metadata
// only (a full list of 10,000 every poll would weigh on the API server it measures).
func waitDeployments(ctx context.Context, b *testing.B, c client.Client, n int) {
	for {
		deps := &metav1.PartialObjectMetadataList{}
		deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
		if err := c.List(ctx, deps, client.InNamespace("bench")); err != nil {
			b.Fatal(err)
		}
		if len(deps.Items) == n {
			return
		}
		time.Sleep(time.Second)
	}
}

// requestCounter counts the requests a rest.Config's clients send: reads (GET, which
// includes LIST and WATCH) and writes (everything else).
type requestCounter struct{ reads, writes atomic.Int64 }

func (r *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet {
			r.reads.Add(1)
		} else {
			r.writes.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

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
