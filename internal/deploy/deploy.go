// Package deploy is `workerd-operator deploy`: it runs a wrangler project's own deploy
// path with wrangler's deploy turned into a dry run (Build), maps what that captured
// as `import` does (wrangler.Import), pushes the image, server-side applies the
// objects (kubeapply), waits until they are Ready and finds the Worker's URL.
package deploy

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
	"github.com/workerd-operator/workerd-operator/internal/kubeapply"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// Options are the flags of `deploy`.
type Options struct {
	// Dir is the project directory.
	Dir string
	// Env is the wrangler environment ("" for the top level).
	Env string
	// Namespace of the objects ("" is "default").
	Namespace string
	// Image is the repository the image goes to, e.g. localhost:5001/hello; it is
	// tagged "deploy" and the objects name it by digest.
	Image string
	// DryRun builds the image without pushing it and applies nothing.
	DryRun bool
	// SecretsFrom is a dotenv file (.dev.vars, .env) whose values become the Secret
	// the Worker's secret bindings name; "" reads no values.
	SecretsFrom string
	// R2Endpoint, AllowUnsupported and DispatchNamespace are import's flags of the
	// same names.
	R2Endpoint        string
	AllowUnsupported  bool
	DispatchNamespace string
	// DispatchPlacement is the spec.dispatchPlacement of the user Workers the build
	// uploads through Cloudflare's API (cfapi.go); "" is Dedicated.
	DispatchPlacement v1alpha1.DispatchPlacement
	// ContainerImages is import's --container-image: class → built image.
	ContainerImages map[string]string
	// Rest is the cluster (unused with DryRun).
	Rest *rest.Config
	// Scratch holds the bundle and the build's bookkeeping ("" is a new temporary
	// directory, removed after).
	Scratch string
	// Timeout bounds applying and waiting for Ready.
	Timeout time.Duration
	// Log receives progress lines and the project's build output.
	Log io.Writer
}

// Result is what was deployed.
type Result struct {
	Import  *wrangler.Result
	Objects []*unstructured.Unstructured
	// URL reaches the Worker's Service from where deploy ran when the cluster's
	// Service network is reachable there (make dev), InClusterURL from any pod.
	URL, InClusterURL string
}

// Validate checks the options before anything runs.
func (o Options) Validate() error {
	if o.Image == "" {
		return fmt.Errorf("--image REPO: required: the repository the bundle image is pushed to and the cluster pulls from "+
			"(it defaults to the make dev registry only when make dev's cluster is the current context; %s)", DocsURL)
	}
	if strings.ContainsAny(o.Image, "@") || strings.LastIndex(o.Image, ":") > strings.LastIndex(o.Image, "/") {
		return fmt.Errorf("--image %s: a repository without tag or digest (deploy tags it and names it by digest; %s)", o.Image, DocsURL)
	}
	if o.SecretsFrom != "" {
		if _, err := os.Stat(o.SecretsFrom); err != nil {
			return fmt.Errorf("--secrets-from: %w", err)
		}
	}
	if !o.DryRun && o.Rest == nil {
		return fmt.Errorf("no cluster to deploy to: set KUBECONFIG or --kubeconfig, or pass --dry-run")
	}
	st, err := os.Stat(filepath.Join(o.Dir))
	if err != nil || !st.IsDir() {
		return fmt.Errorf("DIR %s: not a project directory", o.Dir)
	}
	return nil
}

// Run deploys the project in o.Dir.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Scratch == "" {
		dir, err := os.MkdirTemp("", "workerd-operator-deploy-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.Scratch = dir
	}
	start := time.Now()
	bo := BuildOptions{Dir: o.Dir, Env: o.Env, Scratch: o.Scratch, Log: o.Log}
	var api *cloudflareAPI
	if !o.DryRun {
		var err error
		if api, err = startCloudflareAPI(o, projectCompatibilityDate(o.Dir)); err != nil {
			return nil, err
		}
		defer api.Close()
		bo.ExtraEnv = api.Env()
	}
	c, err := Build(ctx, bo)
	uploaded := &Result{}
	if api != nil {
		uploaded.Objects = api.Objects()
	}
	if err != nil {
		return uploaded, err
	}
	fmt.Fprintf(o.Log, "deploy: built in %s; wrangler ran in %s\n", time.Since(start).Round(time.Second), c.Dir)
	res, objs, err := mapAndPush(c, o)
	if err != nil {
		return uploaded, err
	}
	out := &Result{Import: res, Objects: append(objs, uploaded.Objects...)}
	if o.DryRun {
		return out, nil
	}
	if err := applyAndWait(ctx, o, objs); err != nil {
		return out, err
	}
	ns := o.Namespace
	if ns == "" {
		ns = "default"
	}
	if out.URL, out.InClusterURL, err = serviceURL(ctx, o.Rest, ns, res.Worker.Name); err != nil {
		return out, err
	}
	fmt.Fprintf(o.Log, "deploy: Worker %s/%s is Ready in %s: %s (in the cluster: %s)\n", ns, res.Worker.Name,
		time.Since(start).Round(time.Second), out.URL, out.InClusterURL)
	return out, nil
}

// dispatchNamespace is the dispatch namespace the deployed Worker joins: --dispatch-namespace,
// or the project's own `wrangler deploy --dispatch-namespace`, which must agree.
func dispatchNamespace(c *Captured, o Options) (string, error) {
	switch {
	case c.DispatchNamespace == "" || c.DispatchNamespace == o.DispatchNamespace:
		return o.DispatchNamespace, nil
	case o.DispatchNamespace == "":
		fmt.Fprintf(o.Log, "deploy: the project's wrangler deploy names dispatch namespace %s: the Worker is a user Worker of it (%s)\n", c.DispatchNamespace, DispatchDocs)
		return c.DispatchNamespace, nil
	}
	return "", fmt.Errorf("--dispatch-namespace %s: the project's own deploy runs wrangler deploy --dispatch-namespace %s: pass the same or none (%s)",
		o.DispatchNamespace, c.DispatchNamespace, DispatchDocs)
}

func (o Options) namespace() string {
	if o.Namespace == "" {
		return "default"
	}
	return o.Namespace
}

// projectCompatibilityDate is the compatibility_date of the project's wrangler
// configuration, "" when it has none or cannot be read (an upload must then name one).
func projectCompatibilityDate(dir string) string {
	cfg, err := wrangler.Load(dir)
	if err != nil {
		return ""
	}
	d, _ := cfg.Raw["compatibility_date"].(string)
	return d
}

// RepositoryName is the repository name deploy gives a project's image under make dev:
// its directory's name as a lowercase DNS label.
func RepositoryName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var b strings.Builder
	for _, r := range strings.ToLower(filepath.Base(abs)) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	if name := strings.Trim(b.String(), "-._"); name != "" {
		return name
	}
	return "worker"
}

// mapAndPush maps the captured project as import does and pushes (or, dry, only
// builds) its image; the objects name it by digest.
func mapAndPush(c *Captured, o Options) (*wrangler.Result, []*unstructured.Unstructured, error) {
	path, env := c.Dir, c.Env
	if c.Config != "" {
		path = filepath.Join(c.Dir, c.Config)
	}
	if cfg, err := wrangler.Load(path); err == nil && cfg.Generated {
		env = "" // the build tool generated the environment's configuration
	}
	dns, err := dispatchNamespace(c, o)
	if err != nil {
		return nil, nil, err
	}
	res, err := wrangler.Import(wrangler.Options{Path: path, Env: env, Bundle: c.Bundle, Namespace: o.Namespace,
		Image: o.Image, R2Endpoint: o.R2Endpoint, AllowUnsupported: o.AllowUnsupported, DispatchNamespace: dns,
		ContainerImages: o.ContainerImages})
	if err != nil {
		return nil, nil, err
	}
	for _, l := range res.Notes {
		fmt.Fprintf(o.Log, "deploy: note: %s\n", l)
	}
	if res.Image != nil {
		ref := o.Image + ":deploy"
		pinned, m, err := bundleimage.Publish(*res.Image, ref, !o.DryRun, "")
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", ref, err)
		}
		res.SetImage(pinned)
		fmt.Fprintf(o.Log, "deploy: image %s (%d modules, pushed: %v)\n", pinned, len(m.Modules), !o.DryRun)
	}
	objs, err := res.Unstructured()
	if err != nil {
		return nil, nil, err
	}
	if o.SecretsFrom != "" {
		s, err := secretFrom(o.SecretsFrom, res, o.Namespace, o.Log)
		if err != nil {
			return nil, nil, err
		}
		// First: the Worker's pods read it from their start.
		objs = append([]*unstructured.Unstructured{s}, objs...)
	}
	return res, objs, nil
}

// applyAndWait applies objs in order and waits, printing what is pending as it changes.
func applyAndWait(ctx context.Context, o Options, objs []*unstructured.Unstructured) error {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	for _, u := range objs {
		fmt.Fprintf(o.Log, "deploy: apply %s %s/%s\n", u.GetKind(), kubeapply.NamespaceOf(u), u.GetName())
	}
	if err := kubeapply.Apply(ctx, o.Rest, objs, timeout); err != nil {
		return err
	}
	start, seen := time.Now(), map[string]bool{}
	return kubeapply.WaitReady(ctx, o.Rest, objs, timeout, func(pending []string) {
		if len(pending) == 0 {
			fmt.Fprintf(o.Log, "deploy: all Ready after %s\n", time.Since(start).Round(time.Second))
		}
		now := map[string]bool{}
		for _, p := range pending {
			if now[p] = true; !seen[p] { // only what changed
				fmt.Fprintf(o.Log, "deploy: waiting: %s\n", p)
			}
		}
		seen = now
	})
}

// serviceURL is the http URL of the Worker's Service: its ClusterIP and its first port,
// and its cluster DNS name.
func serviceURL(ctx context.Context, cfg *rest.Config, ns, name string) (string, string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", err
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("the Worker is Ready but its Service: %w", err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", "", fmt.Errorf("Service %s/%s has no ClusterIP and port", ns, name)
	}
	port := svc.Spec.Ports[0].Port
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, port), fmt.Sprintf("http://%s.%s.svc:%d", name, ns, port), nil
}
