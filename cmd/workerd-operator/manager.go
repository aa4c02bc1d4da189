package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/scheme"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/webhook"
)

// managerFlags are the manager's command-line settings.
type managerFlags struct {
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	cronClaimAhead time.Duration
	// failureLogScan is --failure-log-scan-interval (controller.SetupAll).
	failureLogScan time.Duration
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	webhookPort    int
	webhookHost    string
	webhookCertDir string
	webhookSecret  string
	// invocationMetrics is --invocation-metrics (specs.Options.NoInvocationMetrics negated).
	invocationMetrics bool
	webhookService    string
	enableWebhooks    bool
	defaultProfile    string
	customLimits      string
	development       bool
	opts              specs.Options
	watch             []string
	policy            policyFlags
	isolation         isolationFlags
	requestCF         requestCFFlags
	customMetrics     customMetricsFlags
	containers        containersFlags
	// certsReady is closed once the webhook serving certificate is in the cert dir
	// (nil: the certificate is provided, e.g. by cert-manager).
	certsReady <-chan struct{}
}

// isolationFlags are the cluster admin's isolation settings for every workerd pod
// (specs.Options, docs/security.md "Isolation").
type isolationFlags struct {
	runtimeClass  string
	hostUsers     bool
	emptyDirLimit string
}

func (i *isolationFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&i.runtimeClass, "workerd-runtime-class", "", "runtimeClassName of every workerd pod, e.g. a RuntimeClass of gVisor or Kata Containers; default: none (the node's runtime)")
	fl.BoolVar(&i.hostUsers, "workerd-host-users", true, "false gives every workerd pod hostUsers: false, a user namespace of its own (Kubernetes >= 1.33 and a runtime that supports it)")
	fl.StringVar(&i.emptyDirLimit, "workerd-emptydir-size-limit", "", "sizeLimit of each emptyDir of every workerd pod (/tmp and the sidecar's store), a quantity such as 256Mi; default: none")
}

// apply sets the isolation fields of o. Errors: a size limit that is not a quantity.
func (i *isolationFlags) apply(o *specs.Options) error {
	o.RuntimeClassName, o.HostUsers = i.runtimeClass, i.hostUsers
	if i.emptyDirLimit == "" {
		return nil
	}
	q, err := resource.ParseQuantity(i.emptyDirLimit)
	if err != nil {
		return fmt.Errorf("--workerd-emptydir-size-limit: %w", err)
	}
	o.EmptyDirSizeLimit = &q
	return nil
}

// policyFlags are the cluster admin's policy for what Worker authors may put into pods
// (webhook.Policy, docs/security-policy.md).
type policyFlags struct {
	runtimeImages   []string
	containerImages []string
	containerTypes  []string
	maxContainers   int32
	workerdVersions []string
	serviceAccounts []string
	priorityClasses []string
	tolerationKeys  []string
	nodePlacement   bool
	serviceTypes    []string
	maxProfile      string
	maxCPU          string
	// outboundAllowed bounds spec.outbound.allow; outboundDeny applies to every Worker.
	outboundAllowed []string
	outboundDeny    []string
}

func (p *policyFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&p.runtimeImages, "allowed-runtime-images", nil, "images spec.runtime.image may name: an image, a repository (its tags and digests), a prefix ending in / or *; default: the --workerd-image-repository")
	fl.StringSliceVar(&p.containerImages, "allowed-container-images", nil, "images a DurableObjectNamespace's spec.container.image may name (forms of --allowed-runtime-images); default: none, containers are refused (docs/containers.md)")
	fl.StringSliceVar(&p.containerTypes, "allowed-container-instance-types", nil, "instance types spec.container.instanceType may name (lite, basic, standard-1 to standard-4); default: "+strings.Join(webhook.DefaultContainerInstanceTypes, ","))
	fl.Int32Var(&p.maxContainers, "max-container-instances", webhook.DefaultMaxContainerInstances, "the largest spec.container.maxInstances a DurableObjectNamespace may ask for")
	fl.StringSliceVar(&p.workerdVersions, "allowed-workerd-versions", nil, "workerd versions spec.runtime.version may name besides the operator's own (--workerd-image's tag), or *; default: none")
	fl.StringSliceVar(&p.serviceAccounts, "allowed-service-accounts", nil, "ServiceAccounts spec.pod.serviceAccountName may name (* for any); default: none, the namespace's default account only")
	fl.StringSliceVar(&p.priorityClasses, "allowed-priority-classes", nil, "priority classes spec.pod.priorityClassName may name (* for any); default: none")
	fl.StringSliceVar(&p.tolerationKeys, "allowed-toleration-keys", nil, "taint keys spec.pod.tolerations may tolerate (* for any); default: none")
	fl.BoolVar(&p.nodePlacement, "allow-node-placement", false, "allow spec.pod.nodeSelector and spec.pod.affinity")
	fl.StringSliceVar(&p.serviceTypes, "allowed-service-types", nil, "Service types spec.service.type may take besides ClusterIP: NodePort, LoadBalancer; default: none")
	fl.StringVar(&p.maxProfile, "max-limit-profile", "", "most permissive limit profile in namespaces without the label "+webhook.NamespaceProfileLabel+": free, paid or custom; default: paid, or --default-limit-profile when more permissive")
	fl.StringVar(&p.maxCPU, "max-workerd-cpu", "1", "most CPU spec.pod.resources may give the workerd container")
	fl.StringSliceVar(&p.outboundAllowed, "allowed-outbound", nil, "CIDRs and tokens (public, private, local) spec.outbound.allow entries must lie within (docs/outbound.md); default: --outbound-default-allow")
	fl.StringSliceVar(&p.outboundDeny, "outbound-deny", nil, "CIDRs and tokens no Worker may connect to, whatever its spec.outbound says; default: none")
}

// outbound returns the rendering's outbound default (allow: defaultAllow; deny: the
// admin's) and the bound of spec.outbound.allow. Errors name the flag.
func (p *policyFlags) outbound(defaultAllow []string) (outbound.Rules, []string, error) {
	def, err := outbound.ParseList(defaultAllow)
	if err != nil {
		return outbound.Rules{}, nil, fmt.Errorf("--outbound-default-allow: %w", err)
	}
	deny, err := outbound.ParseList(p.outboundDeny)
	if err != nil {
		return outbound.Rules{}, nil, fmt.Errorf("--outbound-deny: %w", err)
	}
	bound, err := outbound.ParseList(p.outboundAllowed)
	if err != nil {
		return outbound.Rules{}, nil, fmt.Errorf("--allowed-outbound: %w", err)
	}
	if len(bound) == 0 {
		bound = def
	}
	p.outboundDeny = deny // parsed, for the webhook's R2Bucket check
	return outbound.Rules{Allow: def, Deny: deny}, bound, nil
}

// build returns the webhook policy; runtime images default to workerdRepository.
// Errors: a CPU quantity that does not parse.
func (p *policyFlags) build(workerdRepository string) (webhook.Policy, error) {
	cpu, err := resource.ParseQuantity(p.maxCPU)
	if err != nil {
		return webhook.Policy{}, fmt.Errorf("--max-workerd-cpu: %w", err)
	}
	for _, v := range p.workerdVersions {
		if v != webhook.AnyValue && podcontract.ImageWorkerdVersion("workerd:"+v) != v {
			return webhook.Policy{}, fmt.Errorf("--allowed-workerd-versions: %q is not a workerd release (1.YYYYMMDD.N) or *", v)
		}
	}
	images := p.runtimeImages
	if len(images) == 0 {
		images = []string{workerdRepository}
	}
	types := make([]corev1.ServiceType, 0, len(p.serviceTypes))
	for _, t := range p.serviceTypes {
		types = append(types, corev1.ServiceType(t))
	}
	return webhook.Policy{
		RuntimeImages: images, ContainerImages: p.containerImages, ContainerInstanceTypes: p.containerTypes, MaxContainerInstances: p.maxContainers, WorkerdVersions: p.workerdVersions, ServiceAccounts: p.serviceAccounts, PriorityClasses: p.priorityClasses,
		TolerationKeys: p.tolerationKeys, NodePlacement: p.nodePlacement, ServiceTypes: types,
		MaxProfile: limits.Profile(p.maxProfile), MaxCPU: cpu, Outbound: p.outboundAllowed, OutboundDeny: p.outboundDeny,
	}, nil
}

func newManagerCommand() *cobra.Command {
	f := &managerFlags{opts: specs.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers, the admission webhooks and the cron dispatcher",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManager(f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS, authenticated); 0 disables it")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader (run several replicas safely)")
	fl.StringVar(&f.leaderElectNS, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election Lease (default: $POD_NAMESPACE, else the in-cluster namespace)")
	fl.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before taking over (bounds how late a cron slot runs after the leader dies)")
	fl.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership; less than the lease duration")
	fl.DurationVar(&f.cronClaimAhead, "cron-claim-ahead", cronschedule.DefaultClaimAhead, "how long before a slot the cron dispatcher claims it (a write per CronSchedule), so that at the slot only one write is left before the dispatches; negative: claim as slots come due")
	fl.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between leader election attempts")
	fl.IntVar(&f.webhookPort, "webhook-port", 9443, "port of the admission webhook server")
	fl.StringVar(&f.webhookHost, "webhook-bind-host", "", "address the webhook server binds (default all)")
	fl.StringVar(&f.webhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of the webhook server")
	fl.StringVar(&f.webhookSecret, "webhook-cert-secret", "", "manage the webhook certificate in this Secret of the manager's namespace (self-signed CA, rotated, injected into the webhook configurations); empty: certificates are provided (e.g. cert-manager)")
	fl.StringVar(&f.webhookService, "webhook-service", "webhook-service", "name of the webhook Service (the certificate's DNS name)")
	fl.StringVar(&f.defaultProfile, "default-limit-profile", "paid", "limit profile of Workers that set none: free, paid or custom")
	fl.StringVar(&f.customLimits, "custom-limits", "", "YAML file of the custom profile's ceilings (docs/limits.md)")
	fl.BoolVar(&f.enableWebhooks, "enable-webhooks", true, "serve the admission webhooks")
	fl.BoolVar(&f.development, "zap-devel", false, "human-readable development logging")
	fl.StringVar(&f.opts.WorkerdImage, "workerd-image", f.opts.WorkerdImage, "image of the pinned workerd (workerd "+podcontract.WorkerdVersion+")")
	fl.StringVar(&f.opts.WorkerdImageRepository, "workerd-image-repository", f.opts.WorkerdImageRepository, "repository of workerd images, for spec.runtime.version")
	fl.StringVar(&f.opts.OperatorImage, "operator-image", envOr("OPERATOR_IMAGE", f.opts.OperatorImage), "image of this operator, run as the pods' sidecar")
	fl.StringVar(&f.opts.ClusterDomain, "cluster-domain", f.opts.ClusterDomain, "cluster DNS domain of in-cluster addresses")
	fl.Int64Var(&f.opts.PreStopSeconds, "prestop-seconds", f.opts.PreStopSeconds, "preStop sleep of workerd containers, in seconds")
	fl.BoolVar(&f.opts.NetworkPolicies, "network-policies", f.opts.NetworkPolicies, "give the pods of every Worker, DurableObjectNamespace and Workflow a NetworkPolicy admitting only their callers (docs/security-internal-plane.md); false deletes the ones the operator made")
	fl.StringVar(&f.opts.MetricsNamespace, "network-policy-metrics-namespace", "", "namespace of the metrics scraper the workerd pods' NetworkPolicies admit to the sidecar port (its /metrics needs the namespace's client certificate, docs/observability.md)")
	fl.BoolVar(&f.invocationMetrics, "invocation-metrics", true, "inject the tail worker that feeds each workerd pod's sidecar with invocation metrics, logs and traces; it costs a fixed time per invocation (docs/observability.md)")
	fl.StringVar(&f.opts.OTLPEndpoint, "otlp-endpoint", "", "OTLP/HTTP traces URL every workerd pod's sidecar exports a span per invocation and per subrequest to, e.g. http://otel-collector.monitoring:4318/v1/traces (docs/observability.md)")
	fl.Int64Var(&f.opts.DrainSeconds, "drain-seconds", f.opts.DrainSeconds, "time workerd may drain in-flight requests after SIGTERM, in seconds")
	f.policy.register(fl)
	f.isolation.register(fl)
	f.requestCF.register(fl)
	f.customMetrics.register(fl)
	f.containers.register(fl)
	fl.StringVar(&f.opts.RequestCF.GeoIPImage, "request-cf-geoip-image", "", "OCI image holding GeoIP databases (*.mmdb, MaxMind's format) at its root, mounted into every Worker pod's sidecar (an image volume) for request.cf's geographic fields; empty: none (docs/request-cf.md)")
	fl.StringSliceVar(&f.watch, "watch-namespaces", nil, "watch only these namespaces (and the manager's own), so that Roles there suffice (docs/security-policy.md); default: every namespace")
	fl.StringSliceVar(&f.opts.Outbound.Allow, "outbound-default-allow", f.opts.Outbound.Allow, "CIDRs and tokens (public, private, local) Workers without spec.outbound.allow may connect to: set your cluster's Service and Pod CIDRs (docs/outbound.md)")
	fl.Int64Var(&f.opts.ShardDrainSeconds, "shard-drain-seconds", f.opts.ShardDrainSeconds, "time a Durable Object shard or Workflow engine pod may finish in-flight calls once deleted (its successor starts after it is gone), in seconds")
	fl.DurationVar(&f.failureLogScan, "failure-log-scan-interval", time.Minute, "how often the manager reads the workerd log of each Ready Worker pod for failures that do not stop it (a connection the outbound policy refused, ...) and records them in the Worker's status (docs/failures.md); 0 disables it")
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// managerMetricsOptions serves /metrics over HTTPS to callers the API server
// authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview; the
// metrics-reader ClusterRole grants it).
func managerMetricsOptions(addr string) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){disableHTTP2},
	}
}

func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

func runManager(f *managerFlags) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(f.development), zap.Level(zapcore.InfoLevel)))
	setupLog := ctrl.Log.WithName("setup")
	if n := applyMemoryLimit(); n > 0 {
		// The caches of a large fleet hold far less than the peaks the collector lets
		// the heap reach by default: the limit makes it collect before the OOM killer.
		setupLog.Info("Go memory limit set", "bytes", n, "of", "$"+podcontract.MemoryLimitEnv)
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  scheme.New(),
		Cache:   controller.CacheOptions(f.watch, os.Getenv("POD_NAMESPACE")),
		Metrics: managerMetricsOptions(f.metricsAddr),
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host:    f.webhookHost,
			Port:    f.webhookPort,
			CertDir: f.webhookCertDir,
			TLSOpts: []func(*tls.Config){disableHTTP2},
		}),
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "workerd-operator.fleet.workerd-operator.io",
		LeaderElectionNamespace: f.leaderElectNS,
		LeaseDuration:           &f.leaseDuration,
		RenewDeadline:           &f.renewDeadline,
		RetryPeriod:             &f.retryPeriod,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := f.isolation.apply(&f.opts); err != nil {
		return err
	}
	if f.opts.Issuer, err = internalIssuer(mgr); err != nil {
		return err
	}
	f.opts.ManagerNamespace = os.Getenv("POD_NAMESPACE")
	f.opts.NoInvocationMetrics = !f.invocationMetrics
	if _, err := f.requestCF.config(); err != nil {
		return err
	}
	f.opts.RequestCF.Colo, f.opts.RequestCF.TrustedProxies = f.requestCF.colo, f.requestCF.trustedProxies
	// The outbound default renders into every Worker; its bound is the webhook's.
	if f.opts.Outbound, f.policy.outboundAllowed, err = f.policy.outbound(f.opts.Outbound.Allow); err != nil {
		return err
	}
	if err := controller.SetupAll(mgr, f.opts, cronschedule.DispatcherOptions{
		DispatchRecord: cronRecord(f.leaderElectNS, setupLog),
		ClaimAhead:     f.cronClaimAhead,
	}, f.watch, f.failureLogScan); err != nil {
		return err
	}
	if f.enableWebhooks {
		if err := setupWebhooks(mgr, f); err != nil {
			return err
		}
	}
	if err := f.customMetrics.setup(mgr, f); err != nil {
		return err
	}
	if err := f.containers.setup(mgr, f); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	setupLog.Info("starting manager", "workerdImage", f.opts.WorkerdImage, "operatorImage", f.opts.OperatorImage)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// internalIssuer loads (or creates) the manager's CA of the internal plane from Secret
// podcontract.ManagerCASecret of the manager's namespace (POD_NAMESPACE), with a direct
// client: the manager's cache holds Secrets' metadata only.
func internalIssuer(mgr ctrl.Manager) (*internalca.Issuer, error) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return nil, fmt.Errorf("manager: POD_NAMESPACE (downward API metadata.namespace) is required: the internal plane's CA lives in Secret %s there", podcontract.ManagerCASecret)
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return internalca.LoadManager(ctx, c, ns)
}

// setupWebhooks registers the admission webhooks. With --webhook-cert-secret the
// manager manages its own serving certificate (open-policy-agent/cert-controller): a
// self-signed CA in that Secret, rotated, with the CA bundle injected into the two
// webhook configurations; the webhooks are registered once the certificate is in place.
func setupWebhooks(mgr ctrl.Manager, f *managerFlags) error {
	opts, err := webhookOptions(f)
	if err != nil {
		return err
	}
	if f.webhookSecret == "" {
		return webhook.SetupWebhooks(mgr, opts)
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return fmt.Errorf("--webhook-cert-secret needs POD_NAMESPACE (downward API metadata.namespace)")
	}
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey: types.NamespacedName{Namespace: ns, Name: f.webhookSecret},
		// Not mgr.GetWebhookServer(): that registers the server, which would start before
		// the rotator has written the certificate and fail on the missing files.
		CertDir:        f.webhookCertDir,
		CAName:         "workerd-operator-ca",
		CAOrganization: "workerd-operator",
		DNSName:        fmt.Sprintf("%s.%s.svc", f.webhookService, ns),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.%s", f.webhookService, ns, f.opts.ClusterDomain)},
		IsReady:        ready,
		Webhooks: append([]rotator.WebhookInfo{
			{Name: "workerd-operator-mutating-webhook-configuration", Type: rotator.Mutating},
			{Name: "workerd-operator-validating-webhook-configuration", Type: rotator.Validating},
		}, f.customMetrics.caInjection()...),
		RequireLeaderElection: false,
	}); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	// cert-controller waits for the certificate files to appear in CertDir, as a Secret
	// volume would provide them; the kubelet refreshes such volumes only after up to a
	// minute or two (and the local cluster not at all), so the manager copies the
	// Secret's files into its own emptyDir itself, and again after each rotation. Every
	// replica serves the webhooks, so every replica copies them, not only the leader: a
	// new replica of a rolling update is not the leader while the old one holds the
	// lease, and would otherwise never become Ready (the rollout would wait forever).
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		return syncCertFiles(ctx, mgr.GetAPIReader(), types.NamespacedName{Namespace: ns, Name: f.webhookSecret}, f.webhookCertDir)
	})); err != nil {
		return err
	}
	f.certsReady = ready
	errc := make(chan error, 1)
	go func() {
		<-ready
		errc <- webhook.SetupWebhooks(mgr, opts)
	}()
	// The readiness check fails until the webhooks serve with a valid certificate.
	return mgr.AddReadyzCheck("webhooks", func(_ *http.Request) error {
		select {
		case err := <-errc:
			errc <- err
			return err
		default:
			return fmt.Errorf("waiting for the webhook certificate")
		}
	})
}

// webhookOptions are the webhooks' options from the flags: the limit table (with the
// custom ceilings file), the default profile and the admin's policy.
func webhookOptions(f *managerFlags) (webhook.Options, error) {
	tbl := limits.Default()
	if f.customLimits != "" {
		var err error
		if tbl, err = limits.LoadCustomFile(f.customLimits); err != nil {
			return webhook.Options{}, err
		}
	}
	pol, err := f.policy.build(f.opts.WorkerdImageRepository)
	if err != nil {
		return webhook.Options{}, err
	}
	// The operator's own workerd is the release --workerd-image's tag names (the pinned
	// one when the tag names none, e.g. a digest).
	version := podcontract.ImageWorkerdVersion(f.opts.WorkerdImage)
	if version == "" {
		version = podcontract.WorkerdVersion
	}
	return webhook.Options{Limits: tbl, DefaultProfile: limits.Profile(f.defaultProfile), WorkerdVersion: version, Policy: pol}, nil
}

// syncCertFiles writes tls.crt and tls.key of the Secret into dir whenever they differ,
// atomically (temporary file + rename), until ctx ends.
func syncCertFiles(ctx context.Context, r client.Reader, key types.NamespacedName, dir string) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		sec := &corev1.Secret{}
		if err := r.Get(ctx, key, sec); err == nil {
			for _, name := range []string{"tls.crt", "tls.key"} {
				want := sec.Data[name]
				if len(want) == 0 {
					continue
				}
				path := filepath.Join(dir, name)
				if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
					continue
				}
				tmp := path + ".tmp"
				if err := os.WriteFile(tmp, want, 0o600); err != nil {
					return fmt.Errorf("webhook certificate: %w", err)
				}
				if err := os.Rename(tmp, path); err != nil {
					return fmt.Errorf("webhook certificate: %w", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// everyReplica is a Runnable that runs on every replica, leader or not
// (a plain RunnableFunc runs on the leader only).
type everyReplica func(ctx context.Context) error

// Start implements manager.Runnable.
func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (everyReplica) NeedLeaderElection() bool { return false }

// cronDispatchRecord is the Lease, in the operator's namespace, in which the cron
// dispatcher confirms the slots it claimed ahead (controllers/cronschedule/claimahead.go);
// the leader-election Role already grants leases there.
const cronDispatchRecord = "workerd-operator-cron-dispatch"

// cronRecord is the cron dispatcher's dispatch record in the operator's namespace
// (leaderElectNS, else the in-cluster namespace). The dispatcher runs on the leader
// only; every slot is still claimed in the CronSchedule's status before dispatch (ahead
// of the slot, confirmed in the record next to the leader-election Lease), so a stale
// leader cannot fire it twice and a dead one loses no slot it claimed ahead
// (docs/cron.md). Without a namespace, slots are claimed as they come due.
func cronRecord(leaderElectNS string, setupLog logr.Logger) types.NamespacedName {
	ns := leaderElectNS
	if ns == "" {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		setupLog.Info("no operator namespace (--leader-election-namespace, $POD_NAMESPACE or in-cluster): cron slots are claimed as they come due, not ahead")
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: ns, Name: cronDispatchRecord}
}
