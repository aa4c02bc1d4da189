package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/ai"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/cache"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/dispatch"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/r2"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
)

// sidecarOptions are the flags of `workerd-operator sidecar`.
type sidecarOptions struct {
	listen, dataDir string
	listenTLS       string
	tlsDir          string
	fronts          []string
	workflowsConfig string
	runnerURL       string
	profile         string
	otlpEndpoint    string
	lease, grace    time.Duration
	lim             channels.Limits // the --channel-max-* values; only changed ones apply
	cache           cache.Options   // the --cache-* values
	requestCF       requestCFFlags
	// backupDir and backupBlobsDir: what the backup ships ($WORKERD_OPERATOR_BACKUP).
	backupDir, backupBlobsDir string
	containers                sidecarContainersFlags
}

// newSidecarCommand: `workerd-operator sidecar --listen 127.0.0.1:9092 --listen-tls
// $(POD_IP):9092 --data-dir /var/lib/workerd-operator [--channel-* limits]`. SIGTERM/SIGINT shut it down gracefully
// (pending channel waits are answered REGISTRY_RESTARTED, then connections drain for up to
// --shutdown-timeout).
func newSidecarCommand() *cobra.Command {
	o := &sidecarOptions{lim: channels.DefaultLimits()}
	cmd := &cobra.Command{
		Use:   podcontract.SidecarCommand,
		Short: "Run the per-pod sidecar (durable channels, workflows, metrics) next to workerd",
		Long: "Serves HTTP on --listen (127.0.0.1:9092 in a pod; workerd reaches it as the external\n" +
			"service `sidecar`): GET /healthz, GET /metrics, the durable-channel API under /channels/\n" +
			"(docs/channels.md). Channel limits come from --limits-profile and may only be lowered\n" +
			"(DurableObjectNamespace spec.channels).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSidecar(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.workflowsConfig, "workflows-config", "", "run the Workflows engine with this config file (internal/workflows/api FileConfig); engine pods only")
	f.StringVar(&o.runnerURL, "workflows-runner-url", "", "the workerd workflows socket the engine runs instances through (http://127.0.0.1:9094); overrides the config file's runnerURL")
	f.StringVar(&o.listen, "listen", "", "listen address host:port of the pod-internal API, for workerd and the runner (127.0.0.1:9092 in a pod)")
	f.StringVar(&o.listenTLS, "listen-tls", "", "listen address host:port of the cross-pod API, mutual TLS with --tls-dir ($(POD_IP):9092 in a pod): probes and, with a client certificate of the namespace or the manager, metrics and the Workflows engine API")
	f.StringArrayVar(&o.fronts, "front", nil, "front one of workerd's cross-pod sockets: NAME=LISTEN=TARGET (rpc=$(POD_IP):9095=127.0.0.1:9195): mutual TLS with --tls-dir, trusting the socket's CA, bounded (docs/security.md), relayed to workerd on TARGET")
	f.StringVar(&o.tlsDir, "tls-dir", podcontract.InternalTLSDir, "directory of the internal TLS files (the namespace's certificate and CA, the manager's CA) for --listen-tls")
	f.StringVar(&o.dataDir, "data-dir", podcontract.SidecarDataDir, "state directory (the shard's PVC or an emptyDir)")
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export a span per invocation and per subrequest to this OTLP/HTTP traces URL, e.g. http://otel-collector.monitoring:4318/v1/traces (docs/observability.md)")
	f.StringVar(&o.profile, "limits-profile", string(limits.DefaultProfile), "limit profile the channel limits come from (free, paid, custom; internal/limits)")
	f.DurationVar(&o.lease, "channel-lease", channels.DefaultLease, "durable-channel subscription lease, renewed by subscribe and every wait; lapsed subscriptions are collected")
	f.DurationVar(&o.grace, "shutdown-timeout", 10*time.Second, "how long SIGTERM waits for open requests and, in a workflow engine pod, for step attempts in flight")
	f.Int64Var(&o.cache.MemoryBytes, "cache-memory-bytes", cache.DefaultMemoryBytes, "Cache API: bytes of cached bodies kept in memory (entries up to 1/16 of it)")
	f.Int64Var(&o.cache.DiskBytes, "cache-disk-bytes", cache.DefaultDiskBytes, "Cache API: bytes of cached bodies kept under <data-dir>/cache")
	f.Int64Var(&o.cache.MaxEntryBytes, "cache-max-entry-bytes", cache.DefaultMaxEntryBytes, "Cache API: the largest response put() stores (Cloudflare: 512 MB)")
	o.requestCF.register(f)
	o.containers.register(f)
	f.StringVar(&o.backupDir, "backup-dir", "", "the store's directory the backup ships when $"+podcontract.BackupConfigEnv+" is set (workerd's localDisk path, "+render.DOStorageDir+" in a pod; docs/backup.md)")
	f.StringVar(&o.backupBlobsDir, "backup-blobs-dir", "", "a KV host's directory of values over 64 KiB, shipped with the databases")
	f.StringVar(&o.requestCF.geoipDir, "request-cf-geoip-dir", "", "directory of the GeoIP databases (*.mmdb, MaxMind's format) request.cf's geographic fields come from ("+podcontract.GeoIPDir+" in a pod; docs/request-cf.md)")
	f.IntVar(&o.lim.MaxChannels, "channel-max-channels", o.lim.MaxChannels, "channels per Durable Object instance (lower than the profile's channels_per_object, 64)")
	f.IntVar(&o.lim.MaxSubscribers, "channel-max-subscribers", o.lim.MaxSubscribers, "subscribers per channel (lower than the profile's subscribers_per_channel, 256)")
	f.IntVar(&o.lim.MaxMessageBytes, "channel-max-message-bytes", o.lim.MaxMessageBytes, "bytes per message (lower than the profile's channel_message_bytes, 65536)")
	f.IntVar(&o.lim.MaxBacklogBytes, "channel-max-backlog-bytes", o.lim.MaxBacklogBytes, "bytes queued per subscriber before it is disconnected (1024 up to the profile's channel_backlog_bytes, 1048576)")
	return cmd
}

func runSidecar(cmd *cobra.Command, o *sidecarOptions) error {
	if o.listen == "" {
		return fmt.Errorf("sidecar: --listen is required (e.g. %s:%d, docs/pod-contract.md)", podcontract.LoopbackHost, podcontract.SidecarPort)
	}
	l, err := sidecarChannelLimits(o, cmd.Flags().Changed)
	if err != nil {
		return err
	}
	so := sidecar.Options{Addr: o.listen, DataDir: o.dataDir, ChannelLimits: l, ChannelLease: o.lease}
	if o.otlpEndpoint != "" {
		otlp, err := telemetry.NewOTLP(cmd.Context(), o.otlpEndpoint)
		if err != nil {
			return err
		}
		so.TailSinks = append(so.TailSinks, otlp.Sink)
		defer func() { _ = otlp.Close(context.Background()) }()
	}
	srv, err := sidecar.New(so)
	if err != nil {
		return err
	}
	var engine *workflows.Engine
	if o.workflowsConfig != "" {
		if engine, err = attachWorkflows(srv, o, cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	if err := attachR2(srv, cmd.ErrOrStderr()); err != nil {
		return err
	}
	if err := attachAI(srv, cmd.ErrOrStderr()); err != nil {
		return err
	}
	if err := attachDispatch(srv, o, cmd.ErrOrStderr()); err != nil {
		return err
	}
	o.cache.Dir = filepath.Join(o.dataDir, "cache")
	c, err := cache.New(o.cache)
	if err != nil {
		return fmt.Errorf("sidecar: cache: %w", err)
	}
	srv.HandleMarked(podcontract.CacheHeader, c)
	if err := attachRequestCF(srv, o.requestCF, cmd.ErrOrStderr()); err != nil {
		return err
	}
	if err := attachBackup(cmd.Context(), srv, o, engine, cmd.ErrOrStderr()); err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	if err := listenTLS(srv, o); err != nil {
		return err
	}
	relays, err := listenFronts(o)
	if err != nil {
		return err
	}
	defer closeAll(relays)
	stopContainers, err := serveContainers(cmd.Context(), o.containers, o.tlsDir, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer stopContainers()
	fmt.Fprintf(cmd.ErrOrStderr(), "sidecar: listening on %s (pod-internal) and %q (cross-pod, mutual TLS), data dir %s, channel registry boot %s\n", srv.Addr(), srv.TLSAddr(), srv.DataDir(), srv.Channels().BootID())
	if n := applyMemoryLimit(); n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "sidecar: Go memory limit %d bytes (90%% of $%s)\n", n, podcontract.MemoryLimitEnv)
	}
	return serveSidecar(cmd.Context(), srv, o.grace, cmd.ErrOrStderr())
}

// listenTLS binds --listen-tls with the files of --tls-dir, when set.
func listenTLS(srv *sidecar.Server, o *sidecarOptions) error {
	if o.listenTLS == "" {
		return nil
	}
	cfg, err := internalca.ServerConfig(o.tlsDir)
	if err != nil {
		return fmt.Errorf("sidecar: --tls-dir: %w", err)
	}
	return srv.ListenTLS(o.listenTLS, cfg)
}

// listenFronts binds each --front and serves it until the sidecar stops.
func listenFronts(o *sidecarOptions) ([]*sidecar.Relay, error) {
	var relays []*sidecar.Relay
	for _, v := range o.fronts {
		r, err := listenFront(v, o.tlsDir)
		if err != nil {
			closeAll(relays)
			return nil, err
		}
		relays = append(relays, r)
		go func() { _ = r.Serve() }()
	}
	return relays, nil
}

func listenFront(v, tlsDir string) (*sidecar.Relay, error) {
	parts := strings.Split(v, "=")
	if len(parts) != 3 {
		return nil, fmt.Errorf("sidecar: --front %q: want NAME=LISTEN=TARGET (docs/pod-contract.md)", v)
	}
	f, ok := podcontract.Fronted(parts[0])
	if !ok {
		return nil, fmt.Errorf("sidecar: --front %q: %q is not a fronted socket (podcontract.FrontedSockets: trigger, gateway, rpc)", v, parts[0])
	}
	cfg, err := internalca.SocketConfig(tlsDir, f.TrustedCA)
	if err != nil {
		return nil, fmt.Errorf("sidecar: --front %s: --tls-dir: %w", f.Name, err)
	}
	return sidecar.ListenRelay(parts[1], parts[2], cfg, sidecar.RelayOptions{})
}

func closeAll(relays []*sidecar.Relay) {
	for _, r := range relays {
		_ = r.Close()
	}
}

// sidecarChannelLimits are the profile's channel limits with the --channel-max-*
// flags that were set applied over them (the flags may only lower them).
func sidecarChannelLimits(o *sidecarOptions, changed func(flag string) bool) (channels.Limits, error) {
	p, err := limits.ParseProfile(o.profile)
	if err != nil {
		return channels.Limits{}, fmt.Errorf("sidecar: --limits-profile: %w", err)
	}
	l := channels.LimitsFor(p)
	lowered := false
	for flag, dst := range map[string]struct{ from, to *int }{
		"channel-max-channels":      {&o.lim.MaxChannels, &l.MaxChannels},
		"channel-max-subscribers":   {&o.lim.MaxSubscribers, &l.MaxSubscribers},
		"channel-max-message-bytes": {&o.lim.MaxMessageBytes, &l.MaxMessageBytes},
		"channel-max-backlog-bytes": {&o.lim.MaxBacklogBytes, &l.MaxBacklogBytes},
	} {
		if changed(flag) {
			*dst.to, lowered = *dst.from, true
		}
	}
	if lowered {
		l.Source = "sidecar --channel-max-* flags (DurableObjectNamespace spec.channels)"
	}
	return l, nil
}

// attachWorkflows makes this a workflow engine pod: the engine's state lives under
// the data dir.
func attachWorkflows(srv *sidecar.Server, o *sidecarOptions, stderr io.Writer) (*workflows.Engine, error) {
	wo, err := workflows.LoadOptionsFile(o.workflowsConfig, o.runnerURL)
	if err != nil {
		return nil, err
	}
	wo.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, "workflows: "+format+"\n", a...) }
	return workflows.Attach(srv, wo)
}

// attachR2 serves the R2 gateway for the buckets in $WORKERD_OPERATOR_R2_BUCKETS, set
// when the pod's Worker has r2Bucket bindings, connecting only where the Worker's
// outbound rules ($WORKERD_OPERATOR_OUTBOUND) allow.
func attachR2(srv *sidecar.Server, stderr io.Writer) error {
	env := os.Getenv(podcontract.R2ConfigEnv)
	if env == "" {
		return nil
	}
	cfg, err := r2.ParseConfig(env)
	if err != nil {
		return err
	}
	o := r2.Options{Logf: func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }}
	if o.Outbound, err = sidecarOutbound(); err != nil {
		return err
	}
	gw, err := r2.New(cfg, o)
	if err != nil {
		return err
	}
	srv.HandleRoot(gw)
	fmt.Fprintf(stderr, "sidecar: R2 gateway for %d bucket(s), outbound rules %s\n", len(cfg), describeRules(o.Outbound))
	return nil
}

// attachAI serves the Workers AI gateway for the ai bindings in
// $WORKERD_OPERATOR_AI_BINDINGS, set when the pod's Worker has ai bindings, connecting
// only where the Worker's outbound rules allow.
func attachAI(srv *sidecar.Server, stderr io.Writer) error {
	env := os.Getenv(podcontract.AIConfigEnv)
	if env == "" {
		return nil
	}
	cfg, err := ai.ParseConfig(env)
	if err != nil {
		return err
	}
	rules, err := sidecarOutbound()
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	srv.HandleMarked(podcontract.AIBindingHeader, ai.New(cfg, ai.Options{Logf: logf, Outbound: rules}))
	fmt.Fprintf(stderr, "sidecar: Workers AI gateway for %d binding(s), outbound rules %s\n", len(cfg), describeRules(rules))
	return nil
}

// attachDispatch serves the dispatcher of the pod's dispatchNamespace bindings when
// $WORKERD_OPERATOR_DISPATCH_DOMAIN is set: over the namespace's mutual TLS when the
// sidecar fronts workerd's sockets (the user Workers' rpc ports then take only that).
func attachDispatch(srv *sidecar.Server, o *sidecarOptions, stderr io.Writer) error {
	domain := os.Getenv(podcontract.DispatchDomainEnv)
	if domain == "" {
		return nil
	}
	do := dispatch.Options{Domain: domain, Logf: func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }}
	if len(o.fronts) > 0 {
		ns, _, _ := strings.Cut(domain, ".")
		cfg, err := internalca.PodClientConfig(o.tlsDir, ns)
		if err != nil {
			return fmt.Errorf("sidecar: dispatch: --tls-dir: %w", err)
		}
		do.TLS = cfg
	}
	if api := os.Getenv(podcontract.DispatchAPIEnv); api != "" && o.tlsDir != "" {
		cfg, err := managerClientTLS(o.tlsDir)
		if err != nil {
			return fmt.Errorf("sidecar: dispatch: $%s: %w", podcontract.DispatchAPIEnv, err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig, tr.MaxIdleConnsPerHost = cfg, 16
		do.Code = &userworkers.Client{Base: api, HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	}
	srv.HandleMarked(podcontract.DispatchNamespaceHeader, dispatch.New(do))
	fmt.Fprintf(stderr, "sidecar: dispatcher for user Workers under %s (mutual TLS: %t; Shared user Workers from %q)\n", domain, do.TLS != nil, os.Getenv(podcontract.DispatchAPIEnv))
	return nil
}

// sidecarOutbound are the Worker's outbound rules ($WORKERD_OPERATOR_OUTBOUND), nil
// when unset.
func sidecarOutbound() (*outbound.Rules, error) {
	s := os.Getenv(podcontract.SidecarOutboundEnv)
	if s == "" {
		return nil, nil
	}
	r := &outbound.Rules{}
	if err := json.Unmarshal([]byte(s), r); err != nil {
		return nil, fmt.Errorf("sidecar: $%s: %w", podcontract.SidecarOutboundEnv, err)
	}
	return r, nil
}

func describeRules(r *outbound.Rules) string {
	if r == nil {
		return "none (any address)"
	}
	return fmt.Sprintf("allow %v deny %v", r.Allow, r.Deny)
}

// serveSidecar serves until the server fails or SIGINT/SIGTERM arrives, then shuts
// down, giving open requests up to grace.
func serveSidecar(ctx context.Context, srv *sidecar.Server, grace time.Duration, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve() }()
	if srv.TLSAddr() != "" {
		go func() {
			if err := srv.ServeTLS(); err != nil {
				errc <- err
			}
		}()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "sidecar: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("sidecar: shutdown: %w", err)
	}
	return <-errc
}

// attachRequestCF serves request.cf to the ingress shim (podcontract.RequestCFPath).
func attachRequestCF(srv *sidecar.Server, f requestCFFlags, stderr io.Writer) error {
	c, err := f.config()
	if err != nil {
		return err
	}
	if c.GeoIP, err = requestcf.OpenGeoIPDir(f.geoipDir); err != nil {
		return err
	}
	srv.Handle(podcontract.RequestCFPath, requestcf.Handler(c, func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }))
	if len(c.GeoIP) > 0 {
		fmt.Fprintf(stderr, "sidecar: request.cf: %d GeoIP database(s) in %s\n", len(c.GeoIP), f.geoipDir)
	}
	return nil
}
