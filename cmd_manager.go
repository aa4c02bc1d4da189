package main

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// managerFlags are the manager's command-line settings.
type managerFlags struct {
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	webhookPort    int
	webhookCertDir string
	enableWebhooks bool
	development    bool
	opts           controllers.Options
}

func newManagerCommand() *cobra.Command {
	f := &managerFlags{opts: controllers.DefaultOptions()}
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
	fl.StringVar(&f.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fl.IntVar(&f.webhookPort, "webhook-port", 9443, "port of the admission webhook server")
	fl.StringVar(&f.webhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of the webhook server")
	fl.BoolVar(&f.enableWebhooks, "enable-webhooks", true, "serve the admission webhooks")
	fl.BoolVar(&f.development, "zap-devel", false, "human-readable development logging")
	fl.StringVar(&f.opts.WorkerdImage, "workerd-image", f.opts.WorkerdImage, "image of the pinned workerd (workerd "+testenv.WorkerdVersion+")")
	fl.StringVar(&f.opts.WorkerdImageRepository, "workerd-image-repository", f.opts.WorkerdImageRepository, "repository of workerd images, for spec.runtime.version")
	fl.StringVar(&f.opts.OperatorImage, "operator-image", envOr("OPERATOR_IMAGE", f.opts.OperatorImage), "image of this operator, run as the pods' sidecar")
	fl.StringVar(&f.opts.ClusterDomain, "cluster-domain", f.opts.ClusterDomain, "cluster DNS domain of in-cluster addresses")
	fl.Int64Var(&f.opts.PreStopSeconds, "prestop-seconds", f.opts.PreStopSeconds, "preStop sleep of workerd containers, in seconds")
	fl.Int64Var(&f.opts.DrainSeconds, "drain-seconds", f.opts.DrainSeconds, "time workerd may drain in-flight requests after SIGTERM, in seconds")
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runManager(f *managerFlags) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(f.development), zap.Level(zapcore.InfoLevel)))
	setupLog := ctrl.Log.WithName("setup")
	disableHTTP2 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: testenv.Scheme(),
		Metrics: metricsserver.Options{
			BindAddress:   f.metricsAddr,
			SecureServing: true,
			TLSOpts:       []func(*tls.Config){disableHTTP2},
		},
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    f.webhookPort,
			CertDir: f.webhookCertDir,
			TLSOpts: []func(*tls.Config){disableHTTP2},
		}),
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "workerd-operator.fleet.workerd-operator.io",
		LeaderElectionNamespace: f.leaderElectNS,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := controllers.SetupAll(mgr, f.opts); err != nil {
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
