package realnode

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metricsServerPort is where metrics-server serves on the node's address.
const metricsServerPort = 4443

// startMetricsServer runs metrics-server on the node (a process in the namespace, as
// CoreDNS is) and registers it with the API server's aggregation layer as clusters do
// (https://github.com/kubernetes-sigs/metrics-server#requirements): a Service without
// a selector in kube-system, its EndpointSlice at the node's address, and the
// APIService v1beta1.metrics.k8s.io, whose caBundle is the node's CA. HPAs on CPU and
// `kubectl top` read it.
func (n *node) startMetricsServer(ctx context.Context) error {
	kc, err := n.pki.kubeconfig("metrics-server", "https://"+nodeIP+":6443", "realnode-metrics-server", "system:masters")
	if err != nil {
		return err
	}
	crt, key, err := n.pki.issue("metrics-server-serving", "metrics-server", nil,
		[]net.IP{net.ParseIP(nodeIP)}, []string{"metrics-server.kube-system.svc"})
	if err != nil {
		return err
	}
	p, err := n.spawn("metrics-server", n.bins.metricsServer,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address="+nodeIP, "--secure-port="+strconv.Itoa(metricsServerPort),
		"--tls-cert-file="+crt, "--tls-private-key-file="+key,
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority="+n.pki.CA,
		"--metric-resolution=10s", "--kubelet-request-timeout=5s")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(n.pki.CA)
	if err != nil {
		return err
	}
	if err := n.apply(ctx, metricsServerObjects(ca), time.Minute); err != nil {
		return err
	}
	return n.wait(p, 2*time.Minute, "the metrics API answering", func() error {
		b, err := n.client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
		if err != nil {
			return errors.New(err.Error() + ": " + string(b))
		}
		return nil
	})
}

// metricsServerObjects registers metrics-server at the node's address.
func metricsServerObjects(ca []byte) []*unstructured.Unstructured {
	port := int64(metricsServerPort)
	return []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "metrics-server", "namespace": "kube-system"},
			"spec": map[string]any{"ports": []any{map[string]any{
				"name": "https", "port": int64(443), "targetPort": port, "protocol": "TCP"}}},
		}},
		{Object: map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": "metrics-server", "namespace": "kube-system",
				"labels": map[string]any{"kubernetes.io/service-name": "metrics-server"}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{nodeIP}, "conditions": map[string]any{"ready": true}}},
			"ports":       []any{map[string]any{"name": "https", "port": port, "protocol": "TCP"}},
		}},
		{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
			"spec": map[string]any{
				"group": "metrics.k8s.io", "version": "v1beta1",
				"service":              map[string]any{"name": "metrics-server", "namespace": "kube-system", "port": int64(443)},
				"caBundle":             base64.StdEncoding.EncodeToString(ca),
				"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			},
		}},
	}
}
