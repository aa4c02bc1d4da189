package main

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/workerd-operator/workerd-operator/internal/custommetrics"
)

// customMetricsFlags turn on the custom metrics API (requests in flight per Worker pod,
// for HorizontalPodAutoscalers; docs/scaling.md "Autoscaling a Worker").
type customMetricsFlags struct {
	port int
}

func (c *customMetricsFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&c.port, "custom-metrics-port", 0, "serve the custom metrics API ("+custommetrics.APIServiceName+": "+custommetrics.RequestsInFlight+
		" of Worker pods, for HorizontalPodAutoscalers) on this port with the webhook serving certificate; the APIService must name the webhook Service at this port (docs/scaling.md); 0: off")
}

// caInjection is the APIService the certificate rotator keeps the CA bundle of.
func (c customMetricsFlags) caInjection() []rotator.WebhookInfo {
	if c.port == 0 {
		return nil
	}
	return []rotator.WebhookInfo{{Name: custommetrics.APIServiceName, Type: rotator.APIService}}
}

// setup serves the API on every replica (the aggregation layer calls any endpoint of
// the Service), once the serving certificate is in place.
func (c customMetricsFlags) setup(mgr ctrl.Manager, f *managerFlags) error {
	if c.port == 0 {
		return nil
	}
	if f.webhookCertDir == "" || !f.enableWebhooks {
		return fmt.Errorf("--custom-metrics-port needs the webhooks (--enable-webhooks, --webhook-cert-dir): the API is served with their serving certificate")
	}
	if c.port == f.webhookPort {
		return fmt.Errorf("--custom-metrics-port %d is the webhook port: give the custom metrics API a port of its own", c.port)
	}
	p := &custommetrics.Provider{Pods: mgr.GetClient(), Scrape: custommetrics.SidecarScraper(f.opts.Issuer)}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		if f.certsReady != nil {
			select {
			case <-f.certsReady:
			case <-ctx.Done():
				return nil
			}
		}
		ctrl.Log.WithName("custom-metrics").Info("serving the custom metrics API", "port", c.port, "metric", custommetrics.RequestsInFlight)
		// A failure here (the front proxy's CA unreadable, the port taken) leaves the
		// APIService unavailable, not the webhooks and controllers stopped.
		if err := custommetrics.Run(ctx, p, custommetrics.ServerOptions{BindAddress: f.webhookHost, Port: c.port, CertDir: f.webhookCertDir}); err != nil && ctx.Err() == nil {
			ctrl.Log.WithName("custom-metrics").Error(err, "the custom metrics API stopped; HPAs on "+custommetrics.RequestsInFlight+" get no values until the manager restarts")
		}
		return nil
	}))
}
