package webhook

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// NamespaceProfileLabel on a Namespace names the most permissive limit profile its
// Workers may use (free, paid or custom), in place of Policy.MaxProfile. Only who may
// update Namespaces (the cluster admin) can set it.
const NamespaceProfileLabel = "fleet.workerd-operator.io/limits-profile"

// PolicyDoc is the document every policy rejection cites.
const PolicyDoc = "docs/security-policy.md"

// AnyValue in a list of Policy allows every value.
const AnyValue = "*"

// Policy is what the cluster admin lets a Worker's author put into the pods the
// operator creates (manager flags, Helm values "policy"; docs/security-policy.md). The
// zero value is the strictest: the operator's own workerd images only, the namespace's
// default ServiceAccount, no priority class, no tolerations, no node placement,
// ClusterIP Services, profiles up to paid, at most one CPU.
type Policy struct {
	// RuntimeImages are the images spec.runtime.image may name: an exact image, a
	// repository ("ghcr.io/org/workerd": its tags and digests), a prefix ending in
	// "/" (a registry or a path), or "*". Empty: spec.runtime.image is refused.
	RuntimeImages []string
	// WorkerdVersions are the workerd versions spec.runtime.version may name besides
	// the operator's own (Options.WorkerdVersion), or "*". Empty: the operator's only.
	WorkerdVersions []string
	// ServiceAccounts spec.pod.serviceAccountName may name ("*": any). Unset is always
	// allowed (the namespace's default account, its token not mounted).
	ServiceAccounts []string
	// PriorityClasses spec.pod.priorityClassName may name ("*": any).
	PriorityClasses []string
	// TolerationKeys spec.pod.tolerations may tolerate ("*": any, including a
	// toleration with no key, which tolerates every taint).
	TolerationKeys []string
	// NodePlacement allows spec.pod.nodeSelector and spec.pod.affinity.
	NodePlacement bool
	// ServiceTypes spec.service.type may take besides ClusterIP (NodePort, LoadBalancer).
	ServiceTypes []corev1.ServiceType
	// MaxProfile is the most permissive limit profile of Workers in a namespace
	// without NamespaceProfileLabel. "": paid, or Options.DefaultProfile when that is
	// more permissive.
	MaxProfile limits.Profile
	// MaxCPU caps spec.pod.resources cpu (limits and requests). Zero: one CPU, what the
	// operator gives a workerd container by default.
	MaxCPU resource.Quantity
	// Outbound bounds spec.outbound.allow: every entry must lie within it
	// (outbound.Within). Empty: spec.outbound.allow is refused (the operator's default
	// applies). The manager sets it to --allowed-outbound, else --outbound-default-allow.
	Outbound []string
	// ContainerImages are the images a DurableObjectNamespace's spec.container.image
	// may name (the forms of RuntimeImages). Empty: containers are refused, since each
	// instance is a Pod running the author's image (docs/containers.md).
	ContainerImages []string
	// ContainerInstanceTypes are the spec.container.instanceType values allowed (unset
	// is lite). Empty: DefaultContainerInstanceTypes.
	ContainerInstanceTypes []string
	// MaxContainerInstances caps spec.container.maxInstances (itself 20 when unset).
	// Zero: DefaultMaxContainerInstances.
	MaxContainerInstances int32
	// OutboundDeny is the admin's deny list (--outbound-deny): an R2Bucket whose
	// spec.s3.endpoint is an address in it is refused, as the sidecar would connect
	// there for the Worker.
	OutboundDeny []string
}

// DefaultContainerInstanceTypes are the instance types allowed unless the admin says
// otherwise: up to one vCPU, as --max-workerd-cpu's default.
var DefaultContainerInstanceTypes = []string{"lite", "basic", "standard-1", "standard-2"}

// DefaultMaxContainerInstances is MaxContainerInstances unless the admin says otherwise.
const DefaultMaxContainerInstances = 50

// profileRank orders the profiles from the most restrictive to the most permissive.
var profileRank = map[limits.Profile]int{limits.Free: 0, limits.Paid: 1, limits.Custom: 2}

// withDefaults fills MaxProfile (from the operator's default profile) and MaxCPU.
func (p Policy) withDefaults(defaultProfile limits.Profile) Policy {
	if p.MaxProfile == "" {
		p.MaxProfile = limits.Paid
		if profileRank[defaultProfile] > profileRank[p.MaxProfile] {
			p.MaxProfile = defaultProfile
		}
	}
	if p.MaxCPU.IsZero() {
		p.MaxCPU = resource.MustParse("1")
	}
	if len(p.ContainerInstanceTypes) == 0 {
		p.ContainerInstanceTypes = DefaultContainerInstanceTypes
	}
	if p.MaxContainerInstances == 0 {
		p.MaxContainerInstances = DefaultMaxContainerInstances
	}
	return p
}

// validate checks the policy's own values. Errors name the setting.
func (p Policy) validate() error {
	if _, ok := profileRank[p.MaxProfile]; !ok {
		return fmt.Errorf("webhook: policy: max limit profile %q: want free, paid or custom", p.MaxProfile)
	}
	for _, t := range p.ServiceTypes {
		if t != corev1.ServiceTypeClusterIP && t != corev1.ServiceTypeNodePort && t != corev1.ServiceTypeLoadBalancer {
			return fmt.Errorf("webhook: policy: service type %q: want ClusterIP, NodePort or LoadBalancer", t)
		}
	}
	if p.MaxCPU.Sign() <= 0 {
		return fmt.Errorf("webhook: policy: max CPU %s: want more than 0", p.MaxCPU.String())
	}
	return nil
}

// forbidden is a policy rejection: what is refused, the rule, and where the admin sets it.
func forbidden(path *field.Path, what, rule, setting string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf("%s (rule: %s; set by the cluster admin: %s; see %s)", what, rule, setting, PolicyDoc))
}

// allowedList describes a policy list for a rule text.
func allowedList(allowed []string, none string) string {
	if len(allowed) == 0 {
		return none
	}
	return "allowed: " + strings.Join(allowed, ", ")
}

// inList reports whether v is in allowed or allowed holds AnyValue.
func inList(v string, allowed []string) bool {
	return slices.Contains(allowed, AnyValue) || slices.Contains(allowed, v)
}

// repoComponent is one path component of a repository name in the distribution
// grammar: lowercase alphanumerics joined by ".", "_", "__" or dashes; never "." or "..".
var repoComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)

// wellFormedImage reports whether image is registry/path[:tag][@digest] with every path
// component in the distribution grammar, so that a prefix match on it cannot be
// escaped by "..", "." or empty components.
func wellFormedImage(image string) bool {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return false
	}
	for _, comp := range strings.Split(ref.Context().RepositoryStr(), "/") {
		if !repoComponent.MatchString(comp) {
			return false
		}
	}
	return true
}

// ImageAllowed reports whether image matches one of allowed (see Policy.RuntimeImages).
// The image must be a well-formed reference (wellFormedImage) for any entry but "*".
// Repositories are compared as the registry resolves them ("alpine" is
// docker.io/library/alpine, not docker.io/alpine/socat), and an entry naming a tag
// allows that reference exactly: a digest beside the tag would run another image.
func ImageAllowed(image string, allowed []string) bool {
	if slices.Contains(allowed, AnyValue) {
		return true
	}
	if !wellFormedImage(image) {
		return false
	}
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return false
	}
	for _, a := range allowed {
		if imageEntryAllows(a, image, ref) {
			return true
		}
	}
	return false
}

// imageEntryAllows: a prefix ending in "/" allows what starts with it; an entry with a
// tag or digest allows that reference only; a repository allows its tags and digests.
func imageEntryAllows(entry, image string, ref name.Reference) bool {
	switch {
	case entry == "":
		return false
	case strings.HasSuffix(entry, "/"):
		return strings.HasPrefix(image, entry)
	case strings.Contains(entry, "@") || strings.LastIndex(entry, ":") > strings.LastIndex(entry, "/"):
		return image == entry
	}
	repo, err := name.NewRepository(entry, name.WeakValidation)
	return err == nil && repo.Name() == ref.Context().Name()
}

// validateContainerPolicy checks spec.container against the admin's policy: the
// image, the instance type and maxInstances.
func validateContainerPolicy(c *check, path *field.Path, spec *v1alpha1.ContainerSpec, pol *Policy) {
	if spec == nil {
		return
	}
	c.add(validateContainerImage(path.Child("image"), spec, pol.ContainerImages))
	if t := spec.InstanceTypeOrDefault(); !inList(t, pol.ContainerInstanceTypes) {
		c.add(forbidden(path.Child("instanceType"), fmt.Sprintf("instance type %s is not allowed", t),
			allowedList(pol.ContainerInstanceTypes, ""), "--allowed-container-instance-types, Helm policy.containerInstanceTypes"))
	}
	if n := spec.MaxInstancesOrDefault(); n > pol.MaxContainerInstances {
		c.add(forbidden(path.Child("maxInstances"), fmt.Sprintf("%d instances at once are not allowed", n),
			fmt.Sprintf("at most %d", pol.MaxContainerInstances), "--max-container-instances, Helm policy.maxContainerInstances"))
	}
}

// validateContainerImage checks spec.container.image against the admin's policy.
func validateContainerImage(path *field.Path, c *v1alpha1.ContainerSpec, allowed []string) *field.Error {
	if c == nil || ImageAllowed(c.Image, allowed) {
		return nil
	}
	if !wellFormedImage(c.Image) {
		return field.Invalid(path, c.Image, "not an image reference (registry/repository[:tag][@digest]); build and push the containers[] Dockerfile first (docs/containers.md)")
	}
	return forbidden(path, fmt.Sprintf("image %q is not allowed: every instance runs it as a Pod of this namespace", c.Image),
		allowedList(allowed, "no container image (containers are off)"), "--allowed-container-images, Helm policy.containerImages")
}

// validatePolicy checks a Worker against the admin's policy: the limit profile its
// namespace may use, spec.runtime.image, spec.service.type and spec.pod.
func (w *Webhooks) validatePolicy(ctx context.Context, c *check, spec *field.Path, old, wk *v1alpha1.Worker) {
	pol := &w.opts.Policy
	s := &wk.Spec
	w.validateProfileAllowed(ctx, c, spec.Child("limits", "profile"), wk.Namespace, w.profileOf(s.Limits))
	if s.Runtime != nil && s.Runtime.Image != "" && !ImageAllowed(s.Runtime.Image, pol.RuntimeImages) {
		c.add(forbidden(spec.Child("runtime", "image"), fmt.Sprintf("image %q is not allowed: it runs with the Worker's Secrets", s.Runtime.Image),
			allowedList(pol.RuntimeImages, "no image but the operator's workerd (set spec.runtime.version only)"),
			"--allowed-runtime-images, Helm policy.runtimeImages"))
	}
	w.validateWorkerdVersion(c, spec.Child("runtime"), old, wk)
	if s.Service != nil && s.Service.Type != "" && s.Service.Type != corev1.ServiceTypeClusterIP && !slices.Contains(pol.ServiceTypes, s.Service.Type) {
		c.add(forbidden(spec.Child("service", "type"), fmt.Sprintf("Service type %s is not allowed: it exposes the Worker outside the cluster", s.Service.Type),
			allowedList(serviceTypeNames(pol.ServiceTypes), "ClusterIP only"), "--allowed-service-types, Helm policy.serviceTypes"))
	}
	if s.Pod != nil {
		validatePodPolicy(c, pol, spec.Child("pod"), s.Pod, wk.SharedWorkersMiB())
	}
	if s.Outbound != nil {
		validateOutboundPolicy(c, pol, spec.Child("outbound", "allow"), s.Outbound.Allow)
		for i, e := range s.Outbound.Deny {
			if _, err := outbound.Parse(e); err != nil {
				c.add(field.Invalid(spec.Child("outbound", "deny").Index(i), e, fmt.Sprintf("%v; see %s", err, outbound.Doc)))
			}
		}
	}
}

// validateWorkerdVersion refuses a workerd release (spec.runtime.version; an image
// holds the release its version names, validateRuntime) other than the operator's and
// those the admin allows. An update
// keeping the release the Worker already ran is admitted with a warning: a Worker
// admitted before the rule, or before an operator upgrade moved the operator's own
// release, stays editable.
func (w *Webhooks) validateWorkerdVersion(c *check, path *field.Path, old, wk *v1alpha1.Worker) {
	pol := &w.opts.Policy
	v := runtimeVersion(&wk.Spec)
	if v == "" || v == w.opts.WorkerdVersion || inList(v, pol.WorkerdVersions) {
		return
	}
	rule := allowedList(pol.WorkerdVersions, "only the operator's workerd "+w.opts.WorkerdVersion)
	const setting = "--allowed-workerd-versions, Helm policy.workerdVersions"
	if old != nil {
		if runtimeVersion(&old.Spec) == v {
			c.warn("%s: workerd %s is no longer allowed (rule: %s; set by the cluster admin: %s; see %s); the Worker keeps it until it changes", path.Child("version"), v, rule, setting, PolicyDoc)
			return
		}
	}
	c.add(forbidden(path.Child("version"), fmt.Sprintf("workerd %s is not allowed", v), rule, setting))
}

// validateOutboundPolicy refuses spec.outbound.allow entries outside Policy.Outbound:
// an author gets no more of the network than the cluster admin allows.
func validateOutboundPolicy(c *check, pol *Policy, path *field.Path, allow []string) {
	for i, e := range allow {
		p, err := outbound.Parse(e)
		if err != nil {
			c.add(field.Invalid(path.Index(i), e, fmt.Sprintf("%v; see %s", err, outbound.Doc)))
			continue
		}
		if !outbound.Within(p, pol.Outbound) {
			c.add(forbidden(path.Index(i), fmt.Sprintf("connecting to %q is not allowed", e),
				allowedList(pol.Outbound, "nothing beyond the operator's default (leave spec.outbound.allow empty)")+" (and addresses inside those)",
				"--allowed-outbound, Helm policy.outboundAllow; see "+outbound.Doc))
		}
	}
}

func serviceTypeNames(ts []corev1.ServiceType) []string {
	out := []string{string(corev1.ServiceTypeClusterIP)}
	for _, t := range ts {
		out = append(out, string(t))
	}
	return out
}

// validatePodPolicy checks spec.pod: ServiceAccount, priority class, tolerations, node
// placement and resources.
func validatePodPolicy(c *check, pol *Policy, path *field.Path, p *v1alpha1.PodOverrides, sharedMiB int64) {
	if sa := p.ServiceAccountName; sa != "" && !inList(sa, pol.ServiceAccounts) {
		c.add(forbidden(path.Child("serviceAccountName"), fmt.Sprintf("ServiceAccount %q is not allowed: the pods would act with its identity", sa),
			allowedList(pol.ServiceAccounts, "only the namespace's default ServiceAccount (leave it unset)"),
			"--allowed-service-accounts, Helm policy.serviceAccounts"))
	}
	if pc := p.PriorityClassName; pc != "" && !inList(pc, pol.PriorityClasses) {
		c.add(forbidden(path.Child("priorityClassName"), fmt.Sprintf("priority class %q is not allowed", pc),
			allowedList(pol.PriorityClasses, "no priority class (leave it unset)"), "--allowed-priority-classes, Helm policy.priorityClasses"))
	}
	for i, t := range p.Tolerations {
		if inList(AnyValue, pol.TolerationKeys) || (t.Key != "" && inList(t.Key, pol.TolerationKeys)) {
			continue
		}
		what := fmt.Sprintf("toleration of taint key %q is not allowed", t.Key)
		if t.Key == "" {
			what = "a toleration without a key tolerates every taint and is not allowed"
		}
		c.add(forbidden(path.Child("tolerations").Index(i).Child("key"), what,
			allowedList(pol.TolerationKeys, "no tolerations"), "--allowed-toleration-keys, Helm policy.tolerationKeys"))
	}
	if !pol.NodePlacement {
		const rule, setting = "node placement is off", "--allow-node-placement, Helm policy.nodePlacement"
		if len(p.NodeSelector) > 0 {
			c.add(forbidden(path.Child("nodeSelector"), "choosing nodes is not allowed", rule, setting))
		}
		if p.Affinity != nil {
			c.add(forbidden(path.Child("affinity"), "affinity is not allowed", rule, setting))
		}
	}
	if p.Resources != nil {
		validateResources(c, pol, path.Child("resources"), p.Resources, sharedMiB)
	}
}

// validateResources checks spec.pod.resources against the profile: cpu and memory
// limits are required (without them the container is unbounded); cpu may not exceed
// Policy.MaxCPU and memory the container memory of the profile's memory_mib ceiling
// (podcontract.WorkerdMemoryMiB), plus sharedMiB for the Shared user Workers a
// dispatch Worker loads (v1alpha1.Worker.SharedWorkersMiB); only cpu, memory and
// ephemeral-storage, no claims.
func validateResources(c *check, pol *Policy, path *field.Path, r *corev1.ResourceRequirements, sharedMiB int64) {
	heap := c.t.Get(c.p, limits.MemoryMiB)
	memMax := resource.MustParse(fmt.Sprintf("%dMi", podcontract.WorkerdMemoryMiB(heap)+sharedMiB))
	memRule := fmt.Sprintf("the container memory of the profile's memory_mib ceiling %d MiB: heap plus headroom (%s)", heap, c.limit(limits.MemoryMiB).Cite(c.p))
	if sharedMiB > 0 {
		memRule += fmt.Sprintf(", plus %d MiB for the Shared user Workers of the dispatchNamespace bindings' maxSharedWorkers (docs/dispatch.md)", sharedMiB)
	}
	for _, part := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sortedResourceNames(part.list) {
			q := part.list[name]
			rp := path.Child(part.name).Key(string(name))
			switch name {
			case corev1.ResourceCPU:
				if q.Cmp(pol.MaxCPU) > 0 {
					c.add(forbidden(rp, fmt.Sprintf("%s CPU is more than allowed", q.String()), "at most "+pol.MaxCPU.String(), "--max-workerd-cpu, Helm policy.maxWorkerdCPU"))
				}
			case corev1.ResourceMemory:
				if q.Cmp(memMax) > 0 {
					c.add(field.Invalid(rp, q.String(), fmt.Sprintf("must be at most %s, %s; see %s", memMax.String(), memRule, PolicyDoc)))
				}
			case corev1.ResourceEphemeralStorage:
			default:
				c.add(forbidden(rp, fmt.Sprintf("resource %s is not allowed", name), "cpu, memory and ephemeral-storage only", "not configurable"))
			}
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Limits[name]; ok && q.Sign() <= 0 {
			c.add(field.Invalid(path.Child("limits").Key(string(name)), q.String(), fmt.Sprintf("must be more than 0: a zero %s limit means none, and the container would be unbounded; see %s", name, PolicyDoc)))
		}
		if _, ok := r.Limits[name]; !ok {
			c.add(field.Required(path.Child("limits").Key(string(name)), fmt.Sprintf("spec.pod.resources replaces the resources derived from spec.limits and must set a %s limit: without one the container is unbounded; see %s", name, PolicyDoc)))
		}
	}
	if len(r.Claims) > 0 {
		c.add(forbidden(path.Child("claims"), "resource claims are not allowed", "no claims", "not configurable"))
	}
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// validateProfileAllowed refuses a profile more permissive than the namespace may use.
func (w *Webhooks) validateProfileAllowed(ctx context.Context, c *check, path *field.Path, ns string, p limits.Profile) {
	max, source, err := w.namespaceMaxProfile(ctx, ns)
	if err != nil {
		c.add(field.Forbidden(path, fmt.Sprintf("cannot tell which profiles namespace %q may use: %v; see %s", ns, err, PolicyDoc)))
		return
	}
	if profileRank[p] > profileRank[max] {
		c.add(field.Forbidden(path, fmt.Sprintf("profile %q is not allowed in namespace %q (rule: the most permissive profile there is %q; set by the cluster admin: %s; see %s)",
			p, ns, max, source, PolicyDoc)))
	}
}

// namespaceMaxProfile returns the most permissive profile Workers of namespace ns may
// use and where that comes from: the namespace's NamespaceProfileLabel, else
// Policy.MaxProfile. Errors: the namespace cannot be read, or its label is not a profile.
func (w *Webhooks) namespaceMaxProfile(ctx context.Context, ns string) (limits.Profile, string, error) {
	def := w.opts.Policy.MaxProfile
	defSource := fmt.Sprintf("--max-limit-profile, Helm policy.maxLimitProfile, or the namespace label %s", NamespaceProfileLabel)
	if w.opts.Reader == nil || ns == "" {
		return def, defSource, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvkNamespace)
	err := w.get(ctx, "", ns, m)
	switch {
	case apierrors.IsNotFound(err):
		return def, defSource, nil
	case err != nil:
		return def, defSource, err
	}
	v, ok := m.Labels[NamespaceProfileLabel]
	if !ok {
		return def, defSource, nil
	}
	p := limits.Profile(v)
	if _, known := profileRank[p]; !known {
		return def, defSource, fmt.Errorf("namespace label %s=%q is not free, paid or custom", NamespaceProfileLabel, v)
	}
	return p, fmt.Sprintf("namespace label %s=%s", NamespaceProfileLabel, v), nil
}

// defaultProfile is the profile the defaulter writes into a Worker of namespace ns:
// the operator's default, lowered to the most permissive one the namespace may use.
func (w *Webhooks) defaultProfile(ctx context.Context, ns string) limits.Profile {
	p := w.opts.DefaultProfile
	if max, _, err := w.namespaceMaxProfile(ctx, ns); err == nil && profileRank[p] > profileRank[max] {
		return max
	}
	return p
}

// workerNamespace is the Worker's namespace, or the admission request's when the
// object does not carry one.
func workerNamespace(ctx context.Context, wk *v1alpha1.Worker) string {
	if wk.Namespace != "" {
		return wk.Namespace
	}
	if req, err := admission.RequestFromContext(ctx); err == nil {
		return req.Namespace
	}
	return ""
}
