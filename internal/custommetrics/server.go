package custommetrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
)

// APIServiceName is the APIService the API server's aggregation layer routes the custom
// metrics API by; one adapter per cluster can hold it.
const APIServiceName = "v1beta2.custom.metrics.k8s.io"

// ServerOptions configure the API server.
type ServerOptions struct {
	// BindAddress and Port are where it listens (HTTPS).
	BindAddress string
	Port        int
	// CertDir holds tls.crt and tls.key, the serving certificate (the webhooks' own,
	// whose name is the Service's), reloaded when they change.
	CertDir string
	// Kubeconfig reaches the API server for the delegated authentication and
	// authorization of callers; "" is the pod's in-cluster configuration.
	Kubeconfig string
}

// Run serves the custom metrics API of p until ctx ends. Callers are authenticated and
// authorized by the API server (TokenReview, SubjectAccessReview, and the aggregation
// layer's front-proxy certificates): the HPA controller, or anyone granted get on
// custom.metrics.k8s.io.
func Run(ctx context.Context, p provider.CustomMetricsProvider, o ServerOptions) error {
	a := &basecmd.AdapterBase{Name: "workerd-operator-custom-metrics", FlagSet: pflag.NewFlagSet("custom-metrics", pflag.ContinueOnError)}
	a.InstallFlags()
	a.RemoteKubeConfigFile = o.Kubeconfig
	a.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	a.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	ss := a.SecureServing
	ss.BindPort = o.Port
	if o.BindAddress != "" {
		if ss.BindAddress = net.ParseIP(o.BindAddress); ss.BindAddress == nil {
			return fmt.Errorf("custom metrics: bind address %q is not an IP address", o.BindAddress)
		}
	}
	ss.ServerCert.CertKey.CertFile = filepath.Join(o.CertDir, "tls.crt")
	ss.ServerCert.CertKey.KeyFile = filepath.Join(o.CertDir, "tls.key")
	a.WithCustomMetrics(p)
	return a.Run(ctx)
}

// MaxExpositionBytes bounds what is read of a pod's /metrics: a pod of the tenant's
// could otherwise stream without end into the manager.
const MaxExpositionBytes = 4 << 20

// clientTTL is how long a namespace's client is reused before its Secret is read again
// (the Issuer reads it on every call).
const clientTTL = 30 * time.Second

// SidecarScraper reads a Worker pod's sidecar /metrics over the internal plane's mutual
// TLS with the manager's certificate (docs/security-internal-plane.md).
func SidecarScraper(issuer *internalca.Issuer) ScrapeFunc {
	var (
		mu      sync.Mutex
		clients = map[string]cachedClient{}
	)
	client := func(ctx context.Context, ns string) (*http.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clients[ns]; ok && time.Since(c.at) < clientTTL {
			return c.hc, nil
		}
		hc, err := issuer.HTTPClient(ctx, ns, 3*time.Second)
		if err != nil {
			return nil, err
		}
		clients[ns] = cachedClient{hc: hc, at: time.Now()}
		return hc, nil
	}
	return func(ctx context.Context, pod *corev1.Pod) (float64, error) {
		hc, err := client(ctx, pod.Namespace)
		if err != nil {
			return 0, err
		}
		return scrapeURL(ctx, hc, "https://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(podcontract.SidecarPort))+"/metrics")
	}
}

type cachedClient struct {
	hc *http.Client
	at time.Time
}

func scrapeURL(ctx context.Context, hc *http.Client, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxExpositionBytes+1))
	if err != nil {
		return 0, err
	}
	if len(b) > MaxExpositionBytes {
		return 0, fmt.Errorf("GET %s: more than %d bytes", url, MaxExpositionBytes)
	}
	return WallSeconds(bytes.NewReader(b))
}

// WallSeconds is the sum of telemetry.WallTimeSeconds over all its series in a
// Prometheus text exposition (0 before the pod's first invocation).
func WallSeconds(r io.Reader) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, err
	}
	fam, ok := fams[telemetry.WallTimeSeconds]
	if !ok {
		return 0, nil
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		return 0, fmt.Errorf("%s is a %s, not a histogram", telemetry.WallTimeSeconds, fam.GetType())
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum, nil
}
