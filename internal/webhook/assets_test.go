package webhook

import (
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// withAssets sets spec.assets (an image and the given fields) on a Worker.
func withAssets(name string, p limits.Profile, set func(a *v1alpha1.WorkerAssets)) client.Object {
	return newWorker(name, p, func(s *v1alpha1.WorkerSpec) {
		s.Assets = &v1alpha1.WorkerAssets{Image: "registry.example/team/site:1"}
		set(s.Assets)
	})
}

// repeatLines is n lines, line(i) each.
func repeatLines(n int64, line func(i int64) string) string {
	var b strings.Builder
	for i := int64(0); i < n; i++ {
		b.WriteString(line(i))
	}
	return b.String()
}

// assetCases are spec.assets' limits just inside and just outside (every profile has
// the same values): _headers at most 100 rules and 2,000 characters a line
// (https://developers.cloudflare.com/workers/static-assets/headers/), _redirects at
// most 2,000 static and 100 dynamic rules of 1,000 characters
// (https://developers.cloudflare.com/workers/static-assets/redirects/), run_worker_first
// at most 100 patterns (the CRD schema).
func assetCases(tbl *limits.Table) []admitCase {
	var cs []admitCase
	add := func(n limits.Name, path string, set func(a *v1alpha1.WorkerAssets, v int64)) {
		cs = append(cs, limitCases(tbl, n, path, func(name string, p limits.Profile, v int64) client.Object {
			return withAssets(name, p, func(a *v1alpha1.WorkerAssets) { set(a, v) })
		})...)
	}
	add(limits.AssetHeaderRules, "spec.assets.headers", func(a *v1alpha1.WorkerAssets, v int64) {
		a.Headers = "# one rule per path\n" + repeatLines(v, func(i int64) string { return fmt.Sprintf("/p%d/*\n  X-Rule: %d\n\n", i, i) })
	})
	add(limits.AssetHeaderLineChars, "spec.assets.headers", func(a *v1alpha1.WorkerAssets, v int64) {
		a.Headers = "/*\n  X-Long: " + strings.Repeat("a", int(v)-len("  X-Long: ")) + "\n"
	})
	add(limits.AssetStaticRedirects, "spec.assets.redirects", func(a *v1alpha1.WorkerAssets, v int64) {
		a.Redirects = "/blog/* /news/:splat 301\n" + repeatLines(v, func(i int64) string { return fmt.Sprintf("/s%d /t 301\n", i) })
	})
	add(limits.AssetDynamicRedirects, "spec.assets.redirects", func(a *v1alpha1.WorkerAssets, v int64) {
		a.Redirects = "/home / 301\n" + repeatLines(v, func(i int64) string { return fmt.Sprintf("/d%d/:slug /t/:slug 302\n", i) })
	})
	add(limits.AssetRedirectChars, "spec.assets.redirects", func(a *v1alpha1.WorkerAssets, v int64) {
		a.Redirects = "/x /" + strings.Repeat("a", int(v)-len("/x /")) + "\n"
	})
	add(limits.AssetRunWorkerFirstRule, "spec.assets.runWorkerFirst", func(a *v1alpha1.WorkerAssets, v int64) {
		a.RunWorkerFirst = make([]string, v)
		for i := range a.RunWorkerFirst {
			a.RunWorkerFirst[i] = fmt.Sprintf("/r%d/*", i)
		}
	})
	cs = append(cs,
		admitCase{name: "assets-binding-clash", obj: newWorker("assets-clash", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = textBindings(1)
			s.Assets = &v1alpha1.WorkerAssets{Image: "registry.example/team/site:1", Binding: "VAR_0"}
		}),
			wantErr: []string{"spec.assets.binding: Duplicate value", "VAR_0 (also spec.bindings[0].name)"}},
		admitCase{name: "assets-run-worker-first-no-slash", obj: withAssets("assets-rwf-bad", limits.Paid, func(a *v1alpha1.WorkerAssets) { a.RunWorkerFirst = []string{"api/*"} }),
			wantErr: []string{"spec.assets.runWorkerFirst[0]", "should match '^!?/'"}},
		admitCase{name: "assets-run-worker-first-only-negative", obj: withAssets("assets-rwf-neg", limits.Paid, func(a *v1alpha1.WorkerAssets) { a.RunWorkerFirst = []string{"!/api/*"} }),
			wantErr: []string{"spec.assets.runWorkerFirst", "at least one pattern without"}},
		admitCase{name: "assets-run-worker-first-negation", obj: withAssets("assets-rwf-ok", limits.Paid, func(a *v1alpha1.WorkerAssets) { a.RunWorkerFirst = []string{"/api/*", "!/api/docs/*"} })},
		admitCase{name: "assets-path-dotdot", obj: withAssets("assets-dotdot", limits.Paid, func(a *v1alpha1.WorkerAssets) { a.Path = "/a/../b" }),
			wantErr: []string{"spec.assets.path", "'..'"}},
		admitCase{name: "assets-html-handling-unknown", obj: withAssets("assets-html-bad", limits.Paid, func(a *v1alpha1.WorkerAssets) { a.HTMLHandling = "auto" }),
			wantErr: []string{"spec.assets.htmlHandling", "auto-trailing-slash"}},
	)
	return cs
}
