package userworkers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/scheme"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// userWorker is a user Worker of dispatch namespace dns in namespace "sites".
func userWorker(name, dns string, p v1alpha1.DispatchPlacement, edit ...func(*v1alpha1.WorkerSpec)) *v1alpha1.Worker {
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: "sites", Name: name}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2026-11-01", DispatchNamespace: dns, DispatchPlacement: p,
		Bindings: []v1alpha1.Binding{{Name: "GREETING", Text: ptr.To("hi")}, {Name: "CONF", JSON: ptr.To(`{"a": [1, 2]}`)}},
		Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{
			{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To("export default {}")},
			{Name: "blob.bin", Type: v1alpha1.ModuleData, ContentBase64: ptr.To("AAEC")},
		}}},
	}}
	for _, e := range edit {
		e(&w.Spec)
	}
	return w
}

// TestHandler: the manager answers a Shared user Worker's code (modules in workerLoader's
// terms, text and json bindings as env) with an ETag naming it, 304 for that ETag, only
// the placement of a Dedicated one, and 404 for a Worker outside the dispatch namespace
// asked for, in another namespace than the caller's, or absent.
func TestHandler(t *testing.T) {
	cmWorker := userWorker("from-cm", "customers", v1alpha1.DispatchPlacementShared, func(s *v1alpha1.WorkerSpec) {
		s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "code", Main: "index.js"}}
	})
	missingCM := userWorker("no-cm", "customers", v1alpha1.DispatchPlacementShared, func(s *v1alpha1.WorkerSpec) {
		s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "absent", Main: "index.js"}}
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sites", Name: "code"}, Data: map[string]string{"index.js": "export default {}"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		userWorker("site-a", "customers", v1alpha1.DispatchPlacementShared),
		userWorker("site-b", "customers", ""),
		userWorker("site-c", "others", v1alpha1.DispatchPlacementShared),
		cmWorker, missingCM, cm).Build()
	h := &userworkers.Handler{Workers: c, ConfigMaps: c, Log: logr.Discard()}
	serve := func(method, path, ns, etag string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if etag != "" {
			r.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		h.ServeNamespace(w, r, ns)
		return w
	}
	a := serve(http.MethodGet, userworkers.Path+"customers/site-a", "sites", "")
	var code render.LoaderCode
	if err := json.Unmarshal(a.Body.Bytes(), &code); a.Code != http.StatusOK || err != nil {
		t.Fatalf("site-a: %d %v %s", a.Code, err, a.Body)
	}
	if code.Placement != v1alpha1.DispatchPlacementShared || code.MainModule != "worker.js" || len(code.Modules) != 2 ||
		code.Modules[1] != (render.LoaderModule{Name: "blob.bin", Type: "data", Content: "AAEC"}) ||
		string(code.Env) != `{"CONF":{"a":[1,2]},"GREETING":"hi"}` || a.Header().Get("ETag") != `"`+code.ID+`"` || len(code.ID) != 32 {
		t.Errorf("site-a's code: %+v, ETag %q", code, a.Header().Get("ETag"))
	}
	for _, c := range []struct {
		name, method, path, ns, etag string
		want                         int
		body                         string
	}{
		{"unchanged", http.MethodGet, userworkers.Path + "customers/site-a", "sites", a.Header().Get("ETag"), http.StatusNotModified, ""},
		{"stale etag", http.MethodGet, userworkers.Path + "customers/site-a", "sites", `"old"`, http.StatusOK, ""},
		{"dedicated", http.MethodGet, userworkers.Path + "customers/site-b", "sites", "", http.StatusOK, `{"placement":"Dedicated"}` + "\n"},
		{"configMap source", http.MethodGet, userworkers.Path + "customers/from-cm", "sites", "", http.StatusOK, ""},
		{"another dispatch namespace's", http.MethodGet, userworkers.Path + "customers/site-c", "sites", "", http.StatusNotFound, ""},
		{"another namespace's caller", http.MethodGet, userworkers.Path + "customers/site-a", "elsewhere", "", http.StatusNotFound, ""},
		{"absent", http.MethodGet, userworkers.Path + "customers/nobody", "sites", "", http.StatusNotFound, ""},
		{"its ConfigMap absent", http.MethodGet, userworkers.Path + "customers/no-cm", "sites", "", http.StatusConflict, "spec.source.configMap.name: ConfigMap \"absent\" not found\n"},
		{"not a DNS label", http.MethodGet, userworkers.Path + "customers/Site_A", "sites", "", http.StatusBadRequest, ""},
		{"traversal", http.MethodGet, userworkers.Path + "customers/../site-a", "sites", "", http.StatusBadRequest, ""},
		{"write", http.MethodPost, userworkers.Path + "customers/site-a", "sites", "", http.StatusMethodNotAllowed, ""},
	} {
		got := serve(c.method, c.path, c.ns, c.etag)
		if got.Code != c.want || c.body != "" && got.Body.String() != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.name, got.Code, got.Body, c.want, c.body)
		}
	}
}

// TestCodeIDChanges: the ID changes with the modules, the bindings and the
// compatibility settings, so a loader keyed by it never runs stale code.
func TestCodeIDChanges(t *testing.T) {
	base := userWorker("site-a", "customers", v1alpha1.DispatchPlacementShared)
	id := func(w *v1alpha1.Worker) string {
		c, err := render.SharedLoaderCode(w, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	first := id(base)
	if again := id(base.DeepCopy()); again != first {
		t.Errorf("the same Worker has IDs %s and %s", first, again)
	}
	for name, edit := range map[string]func(*v1alpha1.WorkerSpec){
		"module": func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules[0].Content = ptr.To("export default {fetch(){}}")
		},
		"binding": func(s *v1alpha1.WorkerSpec) { s.Bindings[0].Text = ptr.To("hello") },
		"date":    func(s *v1alpha1.WorkerSpec) { s.CompatibilityDate = "2026-11-02" },
		"flags":   func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"nodejs_compat"} },
	} {
		w := base.DeepCopy()
		edit(&w.Spec)
		if id(w) == first {
			t.Errorf("%s changed, the ID did not", name)
		}
	}
}
