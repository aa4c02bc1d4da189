// Package namespaced_test runs the manager in namespaced mode (chart value
// rbac.watchNamespaces, manager flag --watch-namespaces) with nothing but the
// permissions the chart grants in that mode, against a real kube-apiserver (envtest).
// It has an API server of its own: the controller suite's manager watches everything.
package namespaced_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/chart"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

const (
	release     = "workerd-operator"
	operatorNS  = "operator-system"
	watchedNS   = "team-a"
	rbacGroup   = "rbac.authorization.k8s.io"
	managerUser = "system:serviceaccount:" + operatorNS + ":" + release + "-controller-manager"
)

// applyChartRBAC creates the ServiceAccount and RBAC objects the chart renders for a
// release in operatorNS watching watchedNS, and returns where it put the manager's Roles
// and the names of its ClusterRoles.
func applyChartRBAC(t *testing.T, admin client.Client) (roles, clusterRoles []string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := chart.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Render(c, release, operatorNS, map[string]any{"rbac": map[string]any{"watchNamespaces": []any{watchedNS}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if !(gk.Group == rbacGroup || gk.Kind == "ServiceAccount") {
			continue
		}
		switch gk.Kind {
		case "Role":
			if o.GetName() == release+"-manager-role" {
				roles = append(roles, o.GetNamespace()+"/"+o.GetName())
			}
		case "ClusterRole":
			clusterRoles = append(clusterRoles, o.GetName())
		}
		if err := admin.Create(context.Background(), o.DeepCopy()); err != nil {
			t.Fatalf("%s %s/%s: %v", gk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return roles, clusterRoles
}

// With only the Roles of the namespaced mode (the generated rules in the watched and the
// release namespace) and a ClusterRole to read Namespaces, the manager, acting as its
// ServiceAccount, reconciles a Worker of the watched namespace: it writes its
// Deployment and its status.
func TestNamespacedModeNeedsOnlyRoles(t *testing.T) {
	cfg := testenv.Start(t)
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{operatorNS, watchedNS, "team-b"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	roles, clusterRoles := applyChartRBAC(t, admin)
	if want := []string{watchedNS + "/" + release + "-manager-role", operatorNS + "/" + release + "-manager-role"}; !sameSet(roles, want) {
		t.Errorf("Roles %v, want %v", roles, want)
	}
	if slices.Contains(clusterRoles, release+"-manager-role") {
		t.Errorf("ClusterRoles %v include the manager's rules", clusterRoles)
	}
	// The failure log scan reads pods/log of the watched namespaces only.
	for ns, want := range map[string]bool{watchedNS: true, "team-b": false} {
		if got := mayReadPodLogs(t, admin, ns); got != want {
			t.Errorf("manager may get pods/log in %s: %v, want %v", ns, got, want)
		}
	}
	// The children are written by server-side apply (patch, create) and removed by the
	// garbage collector: the manager may not update or delete a workload or Service.
	for _, a := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Group: "apps", Resource: "deployments"},
		{Verb: "delete", Group: "apps", Resource: "deployments"},
		{Verb: "update", Group: "apps", Resource: "statefulsets"},
		{Verb: "delete", Group: "apps", Resource: "statefulsets"},
		{Verb: "update", Resource: "services"},
		{Verb: "delete", Resource: "services"},
		{Verb: "update", Resource: "configmaps"},
		{Verb: "delete", Resource: "secrets"},
	} {
		a.Namespace = watchedNS
		if managerMay(t, admin, a) {
			t.Errorf("the manager may %s %s in %s", a.Verb, a.Resource, watchedNS)
		}
	}
	startManager(t, cfg)

	w := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: watchedNS, Name: "hello"}, Spec: fleetv1alpha1.WorkerSpec{
		CompatibilityDate: "2026-11-01",
		Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
			Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To("export default { fetch() { return new Response('hi') } }"),
		}}}},
	}}
	if err := admin.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: watchedNS, Name: "hello"}
	eventually(t, "the Worker's Deployment and status", func() error {
		if err := admin.Get(ctx, key, &appsv1.Deployment{}); err != nil {
			return err
		}
		if err := admin.Get(ctx, key, w); err != nil {
			return err
		}
		if len(w.Status.Conditions) == 0 {
			return fmt.Errorf("no status conditions yet")
		}
		return nil
	})
}

// startManager runs the reconcilers as the manager's ServiceAccount (impersonated),
// caching the watched and the release namespace only.
func startManager(t *testing.T, cfg *rest.Config) {
	t.Helper()
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: managerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS, "system:authenticated"}}
	mgr, err := ctrl.NewManager(as, ctrl.Options{
		Scheme:  testenv.Scheme(),
		Cache:   controller.CacheOptions([]string{watchedNS}, operatorNS),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.SetupAll(mgr, specs.DefaultOptions(), cronschedule.DispatcherOptions{}, []string{watchedNS}, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		select { // a manager whose informers are forbidden may not stop
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
}

// mayReadPodLogs asks the API server (SubjectAccessReview) whether the manager's
// ServiceAccount may get pods/log in ns.
func mayReadPodLogs(t *testing.T, admin client.Client, ns string) bool {
	t.Helper()
	return managerMay(t, admin, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"})
}

// managerMay asks the API server whether the manager's ServiceAccount may do what a
// names.
func managerMay(t *testing.T, admin client.Client, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               managerUser,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS, "system:authenticated"},
		ResourceAttributes: &a,
	}}
	if err := admin.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}
