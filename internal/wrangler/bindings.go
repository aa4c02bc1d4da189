package wrangler

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// migrations records which classes are SQLite-backed (new_sqlite_classes → sql: true).
// Renames, deletions and transfers move or drop stored objects, which the API does
// not do.
func (c *converter) migrations() {
	path, ok := c.eff.Paths["migrations"]
	if !ok {
		return
	}
	for i, m := range list(c.eff.Values["migrations"]) {
		p := fmt.Sprintf("%s[%d]", path, i)
		mm, ok := m.(map[string]any)
		if !ok {
			c.unsupported(p, "not a table")
			continue
		}
		for _, k := range sortedKeys(mm) {
			switch k {
			case "tag", "new_classes":
			case "new_sqlite_classes":
				for _, cl := range list(mm[k]) {
					if s, ok := cl.(string); ok {
						c.sqlClasses[s] = true
					}
				}
			case "renamed_classes", "deleted_classes", "transferred_classes":
				c.unsupported(p+"."+k, "moving or deleting a class's stored objects is not supported")
			default:
				c.unsupported(p+"."+k, unknownReason)
			}
		}
	}
}

// durableObjects: a DurableObjectNamespace per class of this Worker and a binding per
// entry. A class of another Worker (script_name) is bound by the name that Worker's
// import gives it.
func (c *converter) durableObjects(path string, v any) {
	top, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return
	}
	c.only(path, top, "bindings")
	made := map[string]bool{}
	for i, e := range list(top["bindings"]) {
		p := fmt.Sprintf("%s.bindings[%d]", path, i)
		m, ok := e.(map[string]any)
		name, class := str(m, "name"), str(m, "class_name")
		if !ok || name == "" || class == "" {
			c.unsupported(p, "needs name and class_name")
			continue
		}
		c.only(p, m, "name", "class_name", "script_name")
		owner := c.name
		if s := str(m, "script_name"); s != "" {
			owner = dnsName(s)
			c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s: class %s lives in Worker %s; its DurableObjectNamespace comes from importing that project", p, class, owner))
		}
		don := dnsName(owner + "-" + kebab(class))
		c.addBinding(v1alpha1.Binding{Name: name, DurableObjectNamespace: &v1alpha1.LocalObjectReference{Name: don}})
		if owner != c.name || made[don] {
			continue
		}
		made[don] = true
		c.res.DurableObjectNamespaces = append(c.res.DurableObjectNamespaces, &v1alpha1.DurableObjectNamespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DurableObjectNamespace"},
			ObjectMeta: metav1.ObjectMeta{Name: don},
			Spec: v1alpha1.DurableObjectNamespaceSpec{
				WorkerRef: v1alpha1.LocalObjectReference{Name: c.name}, ClassName: class, SQL: c.sqlClasses[class],
			},
		})
	}
}

// workflows: a Workflow per entry, named by its name, and a binding.
func (c *converter) workflows(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		name, binding, class := str(m, "name"), str(m, "binding"), str(m, "class_name")
		if !ok || name == "" || binding == "" || class == "" {
			c.unsupported(p, "needs name, binding and class_name")
			continue
		}
		c.only(p, m, "name", "binding", "class_name", "script_name")
		owner := c.name
		if s := str(m, "script_name"); s != "" {
			owner = dnsName(s)
		}
		wf := dnsName(name)
		c.addBinding(v1alpha1.Binding{Name: binding, Workflow: &v1alpha1.LocalObjectReference{Name: wf}})
		if owner != c.name {
			c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s: workflow %s runs in Worker %s; its Workflow comes from importing that project", p, name, owner))
			continue
		}
		c.res.Workflows = append(c.res.Workflows, &v1alpha1.Workflow{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Workflow"},
			ObjectMeta: metav1.ObjectMeta{Name: wf},
			Spec:       v1alpha1.WorkflowSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: c.name}, ClassName: class},
		})
	}
}

// r2Buckets become r2Bucket bindings to the R2Bucket named after bucket_name. Where
// its objects live (an S3 endpoint) is nothing wrangler knows: Import writes the
// R2Buckets with Options.R2Endpoint.
func (c *converter) r2Buckets(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding, bucket := str(m, "binding"), str(m, "bucket_name")
		if !ok || binding == "" || bucket == "" {
			c.unsupported(p, "needs binding and bucket_name")
			continue
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "binding", "bucket_name", "preview_bucket_name":
			case "jurisdiction":
				c.res.Ignored = append(c.res.Ignored, Issue{p + ".jurisdiction", "where Cloudflare stores the bucket; here spec.s3 of the R2Bucket says"})
			default:
				c.unsupported(p+"."+k, unknownReason)
			}
		}
		name := dnsName(bucket)
		c.addBinding(v1alpha1.Binding{Name: binding, R2Bucket: &v1alpha1.LocalObjectReference{Name: name}})
		if !slices.Contains(c.res.r2, r2Bucket{name, bucket}) {
			c.res.r2 = append(c.res.r2, r2Bucket{name, bucket})
		}
	}
}

// services become service bindings to the Worker of that name.
func (c *converter) services(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding, service := str(m, "binding"), str(m, "service")
		if !ok || binding == "" || service == "" {
			c.unsupported(p, "needs binding and service")
			continue
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "binding", "service", "entrypoint":
			case "environment":
				c.unsupported(p+".environment", "a binding to another environment of a Worker; import that environment as its own Worker and bind it by name")
			default:
				c.unsupported(p+"."+k, unknownReason)
			}
		}
		c.addBinding(v1alpha1.Binding{Name: binding, Service: &v1alpha1.ServiceBinding{Name: dnsName(service), Entrypoint: str(m, "entrypoint")}})
	}
}

// hyperdrive entries become hyperdrive bindings to a Secret "<worker>-<binding>" the
// user creates (host, port, database, user, password, scheme); the Hyperdrive id and a
// localConnectionString are not carried over (no credential lands in the manifests).
func (c *converter) hyperdrive(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding := str(m, "binding")
		if !ok || binding == "" {
			c.unsupported(p, "needs binding")
			continue
		}
		c.only(p, m, "binding", "id", "localConnectionString")
		secret := dnsName(c.name + "-" + binding)
		c.addBinding(v1alpha1.Binding{Name: binding, Hyperdrive: &v1alpha1.HyperdriveBinding{SecretRef: v1alpha1.LocalObjectReference{Name: secret}}})
		c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s: create Secret %s with the database's host, port, database, user, password and scheme (postgres or mysql) (docs/outbound.md)", p, secret))
	}
}

// AISecret is the Secret an imported ai binding names: one per namespace, holding the
// inference server's url, apiKey and model map (docs/ai.md).
const AISecret = "workers-ai"

// ai becomes an ai binding to the namespace's Secret AISecret; `remote` (wrangler dev
// calling Cloudflare) means nothing here.
func (c *converter) ai(path string, v any) {
	m, ok := v.(map[string]any)
	binding := str(m, "binding")
	if ok && len(m) == 0 {
		c.res.Ignored = append(c.res.Ignored, Issue{path, "empty"})
		return
	}
	if !ok || binding == "" {
		c.unsupported(path, "needs binding")
		return
	}
	c.only(path, m, "binding", "remote", "staging")
	c.addBinding(v1alpha1.Binding{Name: binding, AI: &v1alpha1.AIBinding{SecretRef: v1alpha1.LocalObjectReference{Name: AISecret}}})
	c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s: create Secret %s in the Worker's namespace: the url of an OpenAI-compatible inference server and the models key mapping Cloudflare model names to its models, e.g. kubectl -n NAMESPACE create secret generic %s --from-literal=url=http://HOST:PORT/v1 --from-literal=models='{\"*\": \"MODEL\"}' (docs/ai.md)", path, AISecret, AISecret))
}

// tail_consumers become spec.tails: the Worker of that name receives the tail events
// (https://developers.cloudflare.com/workers/observability/logs/tail-workers/).
func (c *converter) tailConsumers(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		service := str(m, "service")
		if !ok || service == "" {
			c.unsupported(p, "needs service")
			continue
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "service":
			case "environment":
				c.unsupported(p+".environment", "a tail Worker in another environment; import that environment as its own Worker and name it")
			default:
				c.unsupported(p+"."+k, unknownReason)
			}
		}
		c.res.Worker.Spec.Tails = append(c.res.Worker.Spec.Tails, v1alpha1.TailConsumer{Service: dnsName(service)})
	}
}

// triggers.crons become one CronSchedule firing the Worker's scheduled() handler.
func (c *converter) triggers(path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return
	}
	c.only(path, m, "crons")
	var crons []string
	for i, e := range list(m["crons"]) {
		if s, ok := e.(string); ok {
			crons = append(crons, s)
		} else {
			c.unsupported(fmt.Sprintf("%s.crons[%d]", path, i), "not a string")
		}
	}
	if len(crons) == 0 {
		return
	}
	c.res.CronSchedules = append(c.res.CronSchedules, &v1alpha1.CronSchedule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "CronSchedule"},
		ObjectMeta: metav1.ObjectMeta{Name: c.name},
		Spec:       v1alpha1.CronScheduleSpec{Schedules: crons, Target: v1alpha1.CronTarget{WorkerRef: &v1alpha1.LocalObjectReference{Name: c.name}}},
	})
}

// limits: cpu_ms and subrequests map to spec.limits.
func (c *converter) limits(path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return
	}
	l := &v1alpha1.WorkerLimits{}
	for _, k := range sortedKeys(m) {
		n, ok := integer(m[k])
		switch {
		case !ok:
			c.unsupported(path+"."+k, "not an integer")
		case k == "cpu_ms":
			l.CPUMs = &n
		case k == "subrequests":
			l.Subrequests = &n
		default:
			c.unsupported(path+"."+k, unknownReason)
		}
	}
	if l.CPUMs != nil || l.Subrequests != nil {
		c.res.Worker.Spec.Limits = l
	}
}

// secrets: every name in .dev.vars (or .dev.vars.<env>) and secrets.required becomes a
// secretKeyRef to the Secret "<worker>-secrets", key = the name. Values are never read.
func (c *converter) secrets(cfg *Config) error {
	names := map[string]bool{}
	if path, ok := c.eff.Paths["secrets"]; ok {
		m, _ := c.eff.Values["secrets"].(map[string]any)
		c.only(path, m, "required")
		for _, s := range list(m["required"]) {
			if n, ok := s.(string); ok {
				names[n] = true
			}
		}
	}
	keys, err := devVarNames(cfg.UserDir, c.eff.Env)
	if err != nil {
		return err
	}
	for _, k := range keys {
		names[k] = true
	}
	if len(names) == 0 {
		return nil
	}
	c.res.Secret = dnsName(c.name + "-secrets")
	for _, k := range sortedKeys(names) {
		c.res.SecretKeys = append(c.res.SecretKeys, k)
		c.addBinding(v1alpha1.Binding{Name: k, SecretKeyRef: secretKeyRef(c.res.Secret, k)})
	}
	return nil
}

var envLine = regexp.MustCompile(`^\s*(?:export\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*=`)

// devVarNames returns the variable names (never the values) of .dev.vars.<env> if it
// exists, else .dev.vars, sorted.
func devVarNames(dir, env string) ([]string, error) {
	var data []byte
	var err error
	for _, n := range []string{".dev.vars." + env, ".dev.vars"} {
		if strings.HasSuffix(n, ".") {
			continue
		}
		data, err = os.ReadFile(filepath.Join(dir, n))
		if err == nil {
			break
		}
		if !os.IsNotExist(err) {
			return nil, err
		}
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := envLine.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names, nil
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// integer reads a whole number as JSON (json.Number) or TOML (int64) gives it.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case interface{ Int64() (int64, error) }:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}
