package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/requestcf/geoiptest"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// CFWorker answers its request.cf and the client-address headers it got.
const CFWorker = `export default {
  async fetch(request) {
    return Response.json({ cf: request.cf ?? null,
      connectingIP: request.headers.get("CF-Connecting-IP"),
      forwardedFor: request.headers.get("X-Forwarded-For") });
  },
};
`

// cfAnswer is CFWorker's answer.
type cfAnswer struct {
	CF           map[string]any `json:"cf"`
	ConnectingIP string         `json:"connectingIP"`
	ForwardedFor *string        `json:"forwardedFor"`
}

// getCF GETs url from the loopback source address src with headers h.
func getCF(t *testing.T, url, src string, h map[string]string) cfAnswer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a cfAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return a
}

// TestRequestCF: the rendered Worker's request.cf comes from the sidecar: the peer's
// address when it is not a trusted proxy (a spoofed CF-Connecting-IP, X-Forwarded-For
// or a cf-blob-like header changes nothing: the http socket has no cfBlobHeader), the trusted proxy's CF-Connecting-IP otherwise,
// with the test GeoIP databases' fields (geoiptest) and the colo name. The Worker's
// CF-Connecting-IP is the client, X-Forwarded-For gets the peer appended
// (https://developers.cloudflare.com/fundamentals/reference/http-headers/).
func TestRequestCF(t *testing.T) {
	dir := t.TempDir()
	if err := geoiptest.Write(dir); err != nil {
		t.Fatal(err)
	}
	dbs, err := requestcf.OpenGeoIPDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	const proxy = "127.0.0.88"
	trusted, _ := requestcf.ParseTrustedProxies([]string{proxy})
	sc := sidecartest.StartSidecar(t, sidecartest.Sidecar{RequestCF: &requestcf.Config{Colo: "TST", TrustedProxies: trusted, GeoIP: dbs}})
	w := sidecartest.InlineWorker("cf", CFWorker)
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	base := sidecartest.StartWorker(t, sc, w, out)
	untrusted, berlin := geoiptest.Networks[2], geoiptest.Networks[0]
	direct := map[string]any{"colo": "TST", "httpProtocol": "HTTP/1.1", "tlsVersion": "", "tlsCipher": "", "requestPriority": ""}
	spoof := map[string]string{"CF-Connecting-IP": berlin.Addr, "X-Forwarded-For": berlin.Addr, "CF-Blob": `{"country":"XX"}`}
	cases := []struct {
		name, src   string
		h           map[string]string
		client, xff string
		cf          map[string]any
	}{
		{"untrusted peer, spoofed headers", untrusted.Addr, spoof, untrusted.Addr, berlin.Addr + ", " + untrusted.Addr, merge(direct, untrusted.Want)},
		{"untrusted peer again (cached)", untrusted.Addr, nil, untrusted.Addr, untrusted.Addr, merge(direct, untrusted.Want)},
		{"trusted proxy", proxy, map[string]string{"CF-Connecting-IP": berlin.Addr}, berlin.Addr, berlin.Addr, merge(map[string]any{"colo": "TST"}, berlin.Want)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := getCF(t, base+"/", tc.src, tc.h)
			if a.ConnectingIP != tc.client || a.ForwardedFor == nil || *a.ForwardedFor != tc.xff || !reflect.DeepEqual(a.CF, tc.cf) {
				t.Errorf("got CF-Connecting-IP %q X-Forwarded-For %v cf %v\nwant %q %q %v", a.ConnectingIP, deref(a.ForwardedFor), a.CF, tc.client, tc.xff, tc.cf)
			}
		})
	}
}

func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return *s
}

// BenchmarkRequestCF: requests to a Worker answering its request.cf through the rendered
// ingress shim and a real sidecar with the test GeoIP databases, one new connection per
// request. "known-client": every request from one source address, whose answer the
// ingress shim keeps after the first; "new-client": every request from a source address
// not seen before, so each one asks the sidecar. The difference is a sidecar call.
func BenchmarkRequestCF(b *testing.B) {
	dir := b.TempDir()
	if err := geoiptest.Write(dir); err != nil {
		b.Fatal(err)
	}
	dbs, err := requestcf.OpenGeoIPDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	sc := sidecartest.StartSidecar(b, sidecartest.Sidecar{RequestCF: &requestcf.Config{Colo: "TST", GeoIP: dbs}})
	w := sidecartest.InlineWorker("cf", CFWorker)
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		b.Fatal(err)
	}
	base := sidecartest.StartWorker(b, sc, w, out)
	next := 0
	for _, bc := range []struct {
		name string
		src  func() string
	}{
		{"known-client", func() string { return "127.0.0.5" }},
		{"new-client", func() string { next++; return fmt.Sprintf("127.9.%d.%d", next/250, 1+next%250) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(bc.src())}}
				hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
				resp, err := hc.Get(base + "/")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestRequestCFThroughAssets: with spec.assets, the ingress shim hands the request to
// the assets service, which hands a path that is no file to the Worker with its cf.
func TestRequestCFThroughAssets(t *testing.T) {
	sc := sidecartest.StartSidecar(t, sidecartest.Sidecar{RequestCF: &requestcf.Config{Colo: "TST"}})
	w := sidecartest.InlineWorker("site", CFWorker)
	w.Spec.Assets = &v1alpha1.WorkerAssets{Image: "registry.example.com/site:1"}
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, podcontract.AssetsSubdir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, podcontract.AssetsSubdir, "index.html"), []byte("<p>hi</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir,
		Externals: map[string]string{podcontract.SidecarService: sc}, SidecarAliases: render.SidecarAliases(w)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	a := getCF(t, "http://"+l.Addrs[podcontract.HTTPSocket]+"/api", "127.0.0.5", nil)
	want := map[string]any{"colo": "TST", "httpProtocol": "HTTP/1.1", "tlsVersion": "", "tlsCipher": "", "requestPriority": ""}
	if !reflect.DeepEqual(a.CF, want) || a.ConnectingIP != "127.0.0.5" {
		t.Errorf("got cf %v CF-Connecting-IP %q, want %v and 127.0.0.5\n%s", a.CF, a.ConnectingIP, want, l.Output())
	}
}
