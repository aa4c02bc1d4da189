package common

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// Options are the manager-wide settings (the builders' options).
type Options = specs.Options

// workerInputs is what a Worker's rendering depends on besides its own spec.
type workerInputs struct {
	configMap *corev1.ConfigMap
	services  map[string]render.ServiceTarget
	hash      string
}

// RenderWorker renders the pods of Worker w after reading everything it references:
// its inputs (resolveInputs), the DurableObjectNamespaces and Workflows it binds. host,
// when set, is the DurableObjectNamespace whose shards are rendered; wfHosts are the
// Workflows whose engine runs in the pods; more change the renderer's input last (a
// Queue's host pod running its consumer's code). It returns the output and the inputs hash.
// Missing references (all of them, in one message) or a spec the renderer refuses are
// Blocked. What it reads is
// what WorkerReaders maps back to the objects rendering w; refs reads the ConfigMap and
// Secrets it references.
func RenderWorker(ctx context.Context, c client.Client, refs *References, opts Options, w *fleetv1alpha1.Worker, host *fleetv1alpha1.DurableObjectNamespace, wfHosts []render.WorkflowHost, more ...func(*render.Input)) (*render.Output, string, error) {
	m := &missing{}
	in, err := resolver{Client: c, Refs: refs, Options: opts, missing: m}.resolveInputs(ctx, w)
	if err != nil {
		return nil, "", err
	}
	dos, err := resolveDurableObjects(ctx, c, w, host, opts, m)
	if err != nil {
		return nil, "", err
	}
	wfs, err := resolveWorkflows(ctx, c, w, opts, m)
	if err != nil {
		return nil, "", err
	}
	stores, err := resolveDataStores(ctx, c, w, opts, m)
	if err != nil {
		return nil, "", err
	}
	r2s, err := resolveR2Buckets(ctx, c, w, m)
	if err != nil {
		return nil, "", err
	}
	if err := m.err(); err != nil {
		return nil, "", err
	}
	hash, err := internalTLSHash(ctx, opts, w.Namespace, in.hash)
	if err != nil {
		return nil, "", err
	}
	rin := render.Input{
		Worker: w, ConfigMap: in.configMap, Services: in.services,
		Options: render.Options{ClusterDomain: opts.ClusterDomain, InternalTLS: true, Outbound: opts.Outbound,
			NoInvocationMetrics: opts.NoInvocationMetrics, ManagerAPI: managerAPI(opts)},
		DurableObjects: dos, Workflows: wfs, WorkflowHosts: wfHosts, DataStores: stores, R2Buckets: r2s,
	}
	if host != nil {
		rin.Host = host.Name
	}
	for _, f := range more {
		f(&rin)
	}
	out, err := render.Render(rin)
	if err != nil {
		return nil, "", &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	return out, hash, nil
}

// internalTLSHash ensures the namespace's internal TLS Secret (opts.Issuer; tests
// without one skip it) and mixes its resourceVersion into the inputs hash, so a renewed
// certificate rolls the pods.
func internalTLSHash(ctx context.Context, opts Options, ns, hash string) (string, error) {
	if opts.Issuer == nil {
		return hash, nil
	}
	rv, err := opts.Issuer.Ensure(ctx, ns)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(hash + "\n" + rv))
	return hex.EncodeToString(h[:])[:16], nil
}

// WorkerRef reads the Worker named by an object's spec.workerRef, running its primary
// deployed version (ServingWorker; live reads that version's spec); a missing one is
// Blocked (ReferenceNotFound).
func WorkerRef(ctx context.Context, c client.Client, live client.Reader, namespace, name string) (*fleetv1alpha1.Worker, error) {
	w := &fleetv1alpha1.Worker{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, w)
	if apierrors.IsNotFound(err) {
		return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
			message: fmt.Sprintf("spec.workerRef: Worker %q not found in namespace %q", name, namespace)}
	}
	if err != nil {
		return nil, err
	}
	return ServingWorker(ctx, live, w)
}

// resolver reads what a Worker references; what is missing goes to missing.
type resolver struct {
	client.Client
	Refs    *References
	Options Options
	missing *missing
}

// missing collects the references of a Worker that do not exist, so that one pass
// reports every one of them (to be fixed together) rather than one per pass.
type missing struct {
	reason   string
	messages []string
}

// add records a missing reference; the first one's reason is the condition's reason.
func (m *missing) add(reason, format string, args ...any) {
	if m.reason == "" {
		m.reason = reason
	}
	m.messages = append(m.messages, fmt.Sprintf(format, args...))
}

// err is nil when nothing is missing, else Blocked naming every missing reference.
func (m *missing) err() error {
	if len(m.messages) == 0 {
		return nil
	}
	return &errBlocked{reason: m.reason, message: strings.Join(m.messages, "; ")}
}

// resolveInputs reads what the Worker references: its source ConfigMap from the API
// server, Secrets as metadata only (the operator never holds secret values) from
// Refs.Meta; their resourceVersions feed the inputs hash.
func (r resolver) resolveInputs(ctx context.Context, w *fleetv1alpha1.Worker) (*workerInputs, error) {
	in := &workerInputs{services: map[string]render.ServiceTarget{}}
	var versions []string
	if src := w.Spec.Source.ConfigMap; src != nil {
		cm := &corev1.ConfigMap{}
		if err := r.Refs.Live.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: src.Name}, cm); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			r.missing.add(fleetv1alpha1.ReasonConfigMapNotFound, "spec.source.configMap: ConfigMap %q not found in namespace %q", src.Name, w.Namespace)
		} else {
			in.configMap = cm
			versions = append(versions, "configmap/"+cm.Name+"@"+cm.ResourceVersion)
		}
	}
	// Secrets and other Workers are resolved here; DurableObjectNamespaces and Workflows
	// by resolveDurableObjects and resolveWorkflows.
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		switch kind {
		case fleetv1alpha1.ReferenceSecret:
			meta := ReferenceMeta("Secret")
			err := r.Refs.Meta.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, meta)
			if apierrors.IsNotFound(err) {
				if !b.Optional() {
					r.missing.add(fleetv1alpha1.ReasonSecretNotFound, "spec.bindings[%d] (%s): Secret %q not found in namespace %q", i, b.Name, name, w.Namespace)
				}
				continue
			}
			if err != nil {
				return nil, err
			}
			versions = append(versions, "secret/"+meta.Name+"@"+meta.ResourceVersion)
		case fleetv1alpha1.ReferenceWorker:
			if err := r.resolveWorker(ctx, w.Namespace, name, fmt.Sprintf("spec.bindings[%d] (%s)", i, b.Name), in); err != nil {
				return nil, err
			}
		}
	}
	for i, t := range w.Spec.Tails {
		if err := r.resolveWorker(ctx, w.Namespace, t.Service, fmt.Sprintf("spec.tails[%d]", i), in); err != nil {
			return nil, err
		}
	}
	sort.Strings(versions)
	h := sha256.New()
	for _, v := range versions {
		fmt.Fprintln(h, v)
	}
	in.hash = hex.EncodeToString(h.Sum(nil))[:16]
	return in, nil
}

// resolveWorker adds Worker ns/name, referenced at field, to in.services; a missing one
// is recorded in r.missing, naming field.
func (r resolver) resolveWorker(ctx context.Context, ns, name, field string, in *workerInputs) error {
	target := &fleetv1alpha1.Worker{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, target)
	if apierrors.IsNotFound(err) {
		r.missing.add(fleetv1alpha1.ReasonReferenceNotFound, "%s: Worker %q not found in namespace %q", field, name, ns)
		return nil
	}
	if err != nil {
		return err
	}
	if dns := target.Spec.DispatchNamespace; dns != "" {
		r.missing.add(fleetv1alpha1.ReasonInvalidSpec, "%s: Worker %q is a user Worker of dispatch namespace %q: it cannot be the target of a service binding or a tail; a dispatch Worker reaches it through a dispatchNamespace binding (docs/dispatch.md)", field, name, dns)
		return nil
	}
	in.services[target.Name] = render.ServiceTarget{Address: render.RPCAddress(target, render.Options{ClusterDomain: r.Options.ClusterDomain})}
	return nil
}

// resolveDurableObjects reads the DurableObjectNamespaces w binds (and host, when
// non-nil) into renderer targets. A missing one is recorded in m, naming the binding.
func resolveDurableObjects(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, host *fleetv1alpha1.DurableObjectNamespace, opts Options, m *missing) (map[string]render.DurableObjectTarget, error) {
	out := map[string]render.DurableObjectTarget{}
	ropts := render.Options{ClusterDomain: opts.ClusterDomain}
	if host != nil {
		t, err := render.HostTargetFor(host, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
		}
		out[host.Name] = t
	}
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		if kind != fleetv1alpha1.ReferenceDurableObjectNamespace {
			continue
		}
		if _, done := out[name]; done {
			continue
		}
		d := &fleetv1alpha1.DurableObjectNamespace{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, d)
		if apierrors.IsNotFound(err) {
			m.add(fleetv1alpha1.ReasonReferenceNotFound, "spec.bindings[%d] (%s): DurableObjectNamespace %q not found in namespace %q", i, b.Name, name, w.Namespace)
			continue
		}
		if err != nil {
			return nil, err
		}
		t, err := render.TargetFor(d, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: fmt.Sprintf("spec.bindings[%d] (%s): %v", i, b.Name, err)}
		}
		out[d.Name] = t
	}
	return out, nil
}

// resolveWorkflows gives the engine address of every Workflow w binds. A missing
// Workflow is recorded in m, naming the binding.
func resolveWorkflows(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, opts Options, m *missing) (map[string]render.WorkflowTarget, error) {
	out := map[string]render.WorkflowTarget{}
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		if kind != fleetv1alpha1.ReferenceWorkflow {
			continue
		}
		wf := &fleetv1alpha1.Workflow{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, wf)
		if apierrors.IsNotFound(err) {
			m.add(fleetv1alpha1.ReasonReferenceNotFound, "spec.bindings[%d] (%s): Workflow %q not found in namespace %q", i, b.Name, name, w.Namespace)
			continue
		}
		if err != nil {
			return nil, err
		}
		out[wf.Name] = render.WorkflowTargetFor(w.Namespace, wf.Name, render.Options{ClusterDomain: opts.ClusterDomain})
	}
	return out, nil
}

// dataStoreKinds maps the reference kinds of data store bindings to their store kind
// and an empty object of that kind.
var dataStoreKinds = map[string]struct {
	kind render.DataKind
	obj  func() client.Object
}{
	fleetv1alpha1.ReferenceKVNamespace: {render.DataKV, func() client.Object { return &fleetv1alpha1.KVNamespace{} }},
	fleetv1alpha1.ReferenceD1Database:  {render.DataD1, func() client.Object { return &fleetv1alpha1.D1Database{} }},
	fleetv1alpha1.ReferenceQueue:       {render.DataQueue, func() client.Object { return &fleetv1alpha1.Queue{} }},
}

// resolveDataStores gives the gateway address of every KVNamespace, D1Database and
// Queue w binds. A missing one is recorded in m, naming the binding.
func resolveDataStores(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, opts Options, m *missing) (map[render.DataRef]string, error) {
	out := map[render.DataRef]string{}
	for i, b := range w.Spec.Bindings {
		ref, name := b.Reference()
		k, ok := dataStoreKinds[ref]
		if !ok {
			continue
		}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, k.obj())
		if apierrors.IsNotFound(err) {
			m.add(fleetv1alpha1.ReasonReferenceNotFound, "spec.bindings[%d] (%s): %s %q not found in namespace %q", i, b.Name, ref, name, w.Namespace)
			continue
		}
		if err != nil {
			return nil, err
		}
		out[render.DataRef{Kind: k.kind, Name: name}] = render.DataAddress(w.Namespace, k.kind, name, render.Options{ClusterDomain: opts.ClusterDomain})
	}
	return out, nil
}

// RenderDataHost renders the host pod of data store h (render.DataHostWorker) with
// internal TLS on, and returns the output and the inputs hash (the namespace's internal
// TLS Secret, so a renewed certificate rolls the pod).
func RenderDataHost(ctx context.Context, opts Options, h render.DataHost, services map[string]render.ServiceTarget) (*render.Output, string, error) {
	hash, err := internalTLSHash(ctx, opts, h.Namespace, "")
	if err != nil {
		return nil, "", err
	}
	out, err := render.Render(render.Input{
		Worker: render.DataHostWorker(h), DataHost: &h, Services: services,
		Options: render.Options{ClusterDomain: opts.ClusterDomain, InternalTLS: true},
	})
	if err != nil {
		return nil, "", &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	return out, hash, nil
}

// resolveR2Buckets gives the store of every R2Bucket w binds. A missing R2Bucket is
// recorded in m, naming the binding; its Secret is checked by the R2Bucket's reconciler
// (a missing one keeps the sidecar from starting: CreateContainerConfigError).
func resolveR2Buckets(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, m *missing) (map[string]render.R2BucketTarget, error) {
	out := map[string]render.R2BucketTarget{}
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		if kind != fleetv1alpha1.ReferenceR2Bucket {
			continue
		}
		rb := &fleetv1alpha1.R2Bucket{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, rb)
		if apierrors.IsNotFound(err) {
			m.add(fleetv1alpha1.ReasonReferenceNotFound, "spec.bindings[%d] (%s): R2Bucket %q not found in namespace %q", i, b.Name, name, w.Namespace)
			continue
		}
		if err != nil {
			return nil, err
		}
		s3 := rb.Spec.S3
		out[name] = render.R2BucketTarget{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Region: s3.Region, SecretName: s3.CredentialsSecret.Name}
	}
	return out, nil
}

// managerAPI is the manager's internal API, or empty when its namespace is unknown.
func managerAPI(opts specs.Options) string {
	if opts.ManagerNamespace == "" {
		return ""
	}
	return podcontract.ContainersAPIURL(opts.ManagerNamespace, opts.ClusterDomain)
}
