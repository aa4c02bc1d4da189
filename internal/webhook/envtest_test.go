package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// NoWebhookNamespace is excluded from the webhooks by the namespace selector the
// suite adds (as the production kustomize patch excludes kube-system); the benchmark
// creates its "without webhook" objects there.
const NoWebhookNamespace = "bench-nowebhook"

type suite struct {
	env      *envtest.Environment
	cfg      *rest.Config
	c        client.Client // records warnings in warns
	warns    *warnRecorder
	table    *limits.Table
	cancel   context.CancelFunc
	startErr error
	// handshakes counts the TLS handshakes (ClientHellos) the webhook server accepted:
	// each is a new connection from the API server.
	handshakes atomic.Int64
}

var (
	suiteOnce sync.Once
	theSuite  *suite
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theSuite != nil && theSuite.env != nil {
		if theSuite.cancel != nil {
			theSuite.cancel()
		}
		_ = theSuite.env.Stop()
	}
	os.Exit(code)
}

// warnRecorder collects the API server's Warning headers.
type warnRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *warnRecorder) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, text)
}

func (r *warnRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

// startSuite starts kube-apiserver and etcd (envtest) with the CRDs of config/crd/bases
// — the Worker CRD extended by one field the Go types do not know (spec.futureField) —
// and the webhook configurations of config/webhook/manifests.yaml (controller-gen
// output of this package's markers), served by a manager running SetupWebhooks with
// the custom ceilings of testdata/custom-ceilings.yaml.
func startSuite(tb testing.TB) *suite {
	tb.Helper()
	suiteOnce.Do(func() {
		s := &suite{warns: &warnRecorder{}}
		theSuite = s
		s.startErr = s.start()
	})
	if theSuite.startErr != nil {
		tb.Fatalf("envtest: %v", theSuite.startErr)
	}
	return theSuite
}

func (s *suite) start() error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	env, err := testenv.NewEnvironment()
	if err != nil {
		return err
	}
	crds, err := loadCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		return err
	}
	env.CRDDirectoryPaths = nil
	env.CRDs = crds
	mw, vw, err := loadWebhookConfigs(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{MutatingWebhooks: mw, ValidatingWebhooks: vw}
	// The machine is shared with other builds: give the control plane time to start.
	env.ControlPlaneStartTimeout = 5 * time.Minute
	env.ControlPlaneStopTimeout = time.Minute
	if os.Getenv("WEBHOOK_TEST_CONTROL_PLANE_OUTPUT") != "" {
		env.AttachControlPlaneOutput = true
	}
	s.env = env
	ctrl.SetLogger(logr.Discard())
	cfg, err := testenv.StartEnv(env)
	if err != nil {
		return err
	}
	s.cfg = cfg
	custom, err := os.ReadFile(filepath.Join("testdata", "custom-ceilings.yaml"))
	if err != nil {
		return err
	}
	if s.table, err = limits.LoadCustom(custom); err != nil {
		return err
	}
	o := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(),
		// The manager's own cache: only the operator's labelled ConfigMaps and Secrets.
		Cache:   controller.CacheOptions(nil, ""),
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir,
			// HTTP/1.1 only, as the manager serves it (cmd/workerd-operator/manager.go disableHTTP2).
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.NextProtos = []string{"http/1.1"}
				c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
					s.handshakes.Add(1)
					return nil, nil // nil: the server's own config
				}
			}},
		}),
	})
	if err != nil {
		return err
	}
	if err := SetupWebhooks(mgr, Options{Limits: s.table, Policy: suitePolicy}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { _ = mgr.Start(ctx) }()
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server on %s did not come up: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = s.warns
	wcfg.QPS, wcfg.Burst = 1000, 1000
	if s.c, err = client.New(wcfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	for ns, profile := range suiteNamespaces {
		labels := map[string]string{}
		if profile != "" {
			labels[NamespaceProfileLabel] = string(profile)
		}
		if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			return err
		}
	}
	return nil
}

// suiteNamespaces are the suite's namespaces and the limit profile each is labelled
// with (NamespaceProfileLabel; "": none, the policy's MaxProfile applies). The table's
// namespace may use every profile, so that every profile's limits are checked there.
var suiteNamespaces = map[string]limits.Profile{
	testNS: limits.Custom, NoWebhookNamespace: "", "bench-webhook": limits.Custom,
	tenantNS: "", freeNS: limits.Free,
}

// suitePolicy is the admin policy the suite's webhooks enforce: one of each kind of
// entry, so that both what it allows and what it refuses can be checked.
var suitePolicy = Policy{
	RuntimeImages:   []string{"registry.example.com/workerd", "mirror.example.com/"},
	WorkerdVersions: []string{"1.20260601.0"},
	ServiceAccounts: []string{"builder"},
	PriorityClasses: []string{"batch"},
	TolerationKeys:  []string{"dedicated"},
	ServiceTypes:    []corev1.ServiceType{corev1.ServiceTypeNodePort},
	Outbound:        []string{"public", "10.96.0.0/12"},
	OutboundDeny:    []string{"169.254.0.0/16"},
}

func loadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Spec.Names.Kind == "Worker" {
			// A CRD newer than the Go types: one extra spec field.
			for i := range crd.Spec.Versions {
				spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
				spec.Properties["futureField"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
				crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
			}
		}
		out = append(out, crd)
	}
	return out, nil
}

// loadWebhookConfigs reads controller-gen's manifests and adds the namespace selector
// that keeps the webhooks off kube-system (and off the benchmark's control namespace).
func loadWebhookConfigs(path string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (generate it: go tool controller-gen webhook paths=./internal/webhook/... output:webhook:artifacts:config=config/webhook)", err)
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", NoWebhookNamespace},
	}}}
	var mw []*admissionregistrationv1.MutatingWebhookConfiguration
	var vw []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, m); err != nil {
				return nil, nil, err
			}
			for i := range m.Webhooks {
				m.Webhooks[i].NamespaceSelector = sel
			}
			mw = append(mw, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, v); err != nil {
				return nil, nil, err
			}
			for i := range v.Webhooks {
				v.Webhooks[i].NamespaceSelector = sel
			}
			vw = append(vw, v)
		}
	}
	if len(mw) != 1 || len(vw) != 1 {
		return nil, nil, fmt.Errorf("%s: want one mutating and one validating configuration, got %d and %d", path, len(mw), len(vw))
	}
	return mw, vw, nil
}
