package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/requestcf/geoiptest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// The suite's operator is given what docs/request-cf.md tells an admin to give it: a
// colo name, a trusted proxy (a loopback address this process sends from, standing for
// an Ingress controller) and a GeoIP image holding the test databases (geoiptest).
const (
	e2eColo       = "e2e"
	e2eProxy      = "127.0.0.88"
	geoipImageRef = "registry.example/e2e/geoip"
)

// geoipImageVolume writes the test GeoIP databases under dir and maps the GeoIP image
// to them.
func geoipImageVolume(dir string) (devcluster.ImageDirectory, error) {
	d := filepath.Join(dir, "geoip")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return devcluster.ImageDirectory{}, err
	}
	return devcluster.ImageDirectory{Image: geoipImageRef, Directory: d}, geoiptest.Write(d)
}

// requestCFValues are the chart's requestCF values giving its manager requestCFArgs'
// flags.
func requestCFValues() map[string]any {
	return map[string]any{"colo": e2eColo, "trustedProxies": []any{e2eProxy + "/32"}, "geoipImage": geoipImageRef + ":1"}
}

// managerArgs adds the manager's --request-cf-* flags to the install bundle, and
// --allowed-workerd-versions with testenv.OtherWorkerdVersion (rollouts_test.go).
func managerArgs(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ci := range containers {
			ctr, _ := ci.(map[string]any)
			args, _ := ctr["args"].([]any)
			ctr["args"] = append(args, "--request-cf-colo="+e2eColo, "--request-cf-trusted-proxies="+e2eProxy+"/32",
				"--request-cf-geoip-image="+geoipImageRef+":1", "--allowed-workerd-versions="+testenv.OtherWorkerdVersion,
				"--allowed-container-images="+cluster.RegistryHost()+"/e2e/")
		}
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return err
		}
	}
	return nil
}

// cfModule answers its request.cf and the client-address headers it got.
const cfModule = `export default {
  async fetch(request) {
    return Response.json({ cf: request.cf ?? null,
      connectingIP: request.headers.get("CF-Connecting-IP"),
      forwardedFor: request.headers.get("X-Forwarded-For") });
  },
};
`

type cfReply struct {
	CF           map[string]any `json:"cf"`
	ConnectingIP string         `json:"connectingIP"`
	ForwardedFor string         `json:"forwardedFor"`
}

// TestRequestCF is Done means 4 of issue 32: a Worker's request.cf holds the fields of
// the test GeoIP databases for the client's address; the client is the peer unless the
// peer is the trusted proxy, so a spoofed CF-Connecting-IP, X-Forwarded-For or cf blob
// header from an untrusted peer changes nothing. Requests go to the pod's http port
// from chosen loopback source addresses (the local cluster's Service proxy connects
// from its own address, as a kube-proxy in userspace mode would) and through the Service.
func TestRequestCF(t *testing.T) {
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "cf-echo"},
		Spec: fleetv1alpha1.WorkerSpec{CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(cfModule)}}}}},
	}
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	waitWorkerReady(t, w.Name)
	pod := workerPods(t, w.Name)[0]
	podURL := fmt.Sprintf("http://%s:%d/", pod.Status.PodIP, podcontract.DefaultHTTPPort)
	untrusted, berlin, austin := geoiptest.Networks[2], geoiptest.Networks[0], geoiptest.Networks[1]
	// workerd's http socket is plaintext HTTP/1.1 (@cloudflare/workers-types: tlsVersion
	// and tlsCipher are "" over plaintext).
	conn := map[string]any{"colo": e2eColo, "httpProtocol": "HTTP/1.1", "tlsVersion": "", "tlsCipher": "", "requestPriority": ""}
	cases := []struct {
		name, src, url string
		headers        map[string]string
		client, xff    string
		cf             map[string]any
	}{
		{"untrusted peer with spoofed headers", untrusted.Addr, podURL,
			map[string]string{"CF-Connecting-IP": berlin.Addr, "X-Forwarded-For": austin.Addr, "CF-Blob": `{"country":"XX"}`},
			untrusted.Addr, austin.Addr + ", " + untrusted.Addr, union(conn, untrusted.Want)},
		{"trusted proxy's CF-Connecting-IP", e2eProxy, podURL, map[string]string{"CF-Connecting-IP": berlin.Addr},
			berlin.Addr, berlin.Addr, union(map[string]any{"colo": e2eColo}, berlin.Want)},
		{"trusted proxy's X-Forwarded-For", e2eProxy, podURL, map[string]string{"X-Forwarded-For": austin.Addr},
			austin.Addr, austin.Addr + ", " + e2eProxy, union(map[string]any{"colo": e2eColo}, austin.Want)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := getCFFrom(t, tc.src, tc.url, tc.headers)
			if got.ConnectingIP != tc.client || got.ForwardedFor != tc.xff || !reflect.DeepEqual(got.CF, tc.cf) {
				t.Errorf("got CF-Connecting-IP %q X-Forwarded-For %q cf %v\nwant %q %q %v", got.ConnectingIP, got.ForwardedFor, got.CF, tc.client, tc.xff, tc.cf)
			}
		})
	}
	// Through the Service: the peer is the Service proxy, an address of no database.
	got := getCFFrom(t, "", serviceURL(t, w.Name)+"/", map[string]string{"CF-Connecting-IP": berlin.Addr})
	if !reflect.DeepEqual(got.CF, conn) || got.ConnectingIP == berlin.Addr || !strings.HasPrefix(got.ConnectingIP, "127.") {
		t.Errorf("through the Service: CF-Connecting-IP %q cf %v, want a loopback address and %v", got.ConnectingIP, got.CF, conn)
	}
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// getCFFrom GETs url from source address src (any when "") and decodes cfModule's answer.
func getCFFrom(t *testing.T, src, url string, headers map[string]string) cfReply {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r cfReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return r
}
