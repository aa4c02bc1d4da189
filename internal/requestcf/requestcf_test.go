package requestcf_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/requestcf/geoiptest"
)

// testConfig is a Config with the test databases (geoiptest), colo "TST" and the
// trusted proxies 10.0.0.0/8 and 192.0.2.1.
func testConfig(t *testing.T) *requestcf.Config {
	t.Helper()
	dir := t.TempDir()
	if err := geoiptest.Write(dir); err != nil {
		t.Fatal(err)
	}
	dbs, err := requestcf.OpenGeoIPDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, db := range dbs {
			_ = db.Close()
		}
	})
	trusted, err := requestcf.ParseTrustedProxies([]string{"10.0.0.0/8", " 192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &requestcf.Config{Colo: "TST", TrustedProxies: trusted, GeoIP: dbs}
}

// direct are the fields of a request whose peer is the client: workerd's http socket
// is plaintext HTTP/1.1, and Cloudflare's tlsVersion and tlsCipher are "" over
// plaintext, requestPriority "" when the client set none
// (@cloudflare/workers-types IncomingRequestCfPropertiesBase, ../shared/testdata/
// cloudflare-templates/*/worker-configuration.d.ts).
var direct = map[string]any{"httpProtocol": "HTTP/1.1", "tlsVersion": "", "tlsCipher": "", "requestPriority": ""}

func with(ms ...map[string]any) map[string]any {
	out := map[string]any{"colo": "TST"}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func TestCompute(t *testing.T) {
	c := testConfig(t)
	berlin, austin := geoiptest.Networks[0], geoiptest.Networks[1]
	cases := []struct {
		name    string
		req     requestcf.Request
		client  string
		trusted bool
		cf      map[string]any
	}{
		{"direct client, spoofed headers ignored", requestcf.Request{Peer: berlin.Addr + ":5000", ConnectingIP: austin.Addr, ForwardedFor: austin.Addr},
			berlin.Addr, false, with(direct, berlin.Want)},
		{"direct client, dual-stack socket's IPv4-mapped peer", requestcf.Request{Peer: "[::ffff:" + austin.Addr + "]:4000"},
			austin.Addr, false, with(direct, austin.Want)},
		{"trusted proxy's CF-Connecting-IP", requestcf.Request{Peer: "10.1.2.3:80", ConnectingIP: berlin.Addr, ForwardedFor: austin.Addr},
			berlin.Addr, true, with(berlin.Want)},
		{"trusted proxy's X-Forwarded-For: last hop not a trusted proxy", requestcf.Request{Peer: "192.0.2.1", ForwardedFor: "203.0.113.99, " + austin.Addr + ", 10.9.9.9"},
			austin.Addr, true, with(austin.Want)},
		{"trusted proxy's CF-Connecting-IP not an address: X-Forwarded-For", requestcf.Request{Peer: "10.1.2.3:80", ConnectingIP: "nonsense", ForwardedFor: berlin.Addr},
			berlin.Addr, true, with(berlin.Want)},
		{"trusted proxy without headers is the client", requestcf.Request{Peer: "10.1.2.3:80"},
			"10.1.2.3", true, with(direct)},
		{"address in no database: geographic fields absent", requestcf.Request{Peer: "192.0.2.55:1"},
			"192.0.2.55", false, with(direct)},
		{"IPv6 peer", requestcf.Request{Peer: "[2001:db8::1]:443"}, "2001:db8::1", false, with(direct)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Compute(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var cf map[string]any
			b, _ := json.Marshal(res.CF)
			_ = json.Unmarshal(b, &cf)
			if res.ClientIP != tc.client || res.TrustedPeer != tc.trusted || !reflect.DeepEqual(cf, tc.cf) {
				t.Errorf("got client %s trusted %v cf %v\nwant client %s trusted %v cf %v", res.ClientIP, res.TrustedPeer, cf, tc.client, tc.trusted, tc.cf)
			}
		})
	}
}

func TestComputeNoConfig(t *testing.T) {
	res, err := (&requestcf.Config{}).Compute(requestcf.Request{Peer: "10.1.2.3:80", ConnectingIP: "203.0.113.7"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientIP != "10.1.2.3" || res.TrustedPeer || !reflect.DeepEqual(res.CF, direct) {
		t.Errorf("got %+v, want the peer as client and only the connection's fields %v", res, direct)
	}
}

func TestParseTrustedProxiesErrors(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.1/"} {
		_, err := requestcf.ParseTrustedProxies([]string{s})
		if err == nil || !strings.Contains(err.Error(), "--request-cf-trusted-proxies") || !strings.Contains(err.Error(), "docs/request-cf.md") {
			t.Errorf("%q: %v, want an error naming the flag and docs/request-cf.md", s, err)
		}
	}
}

func TestOpenGeoIPDirErrors(t *testing.T) {
	if _, err := requestcf.OpenGeoIPDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.mmdb") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := requestcf.OpenGeoIPDir(t.TempDir() + "/missing"); err == nil {
		t.Error("missing dir: no error")
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(requestcf.Handler(testConfig(t), t.Logf))
	defer srv.Close()
	q := url.Values{"peer": {"10.0.0.5:1234"}, "connecting": {geoiptest.Networks[0].Addr}}
	resp, err := http.Get(srv.URL + "/?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res requestcf.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || res.ClientIP != geoiptest.Networks[0].Addr || !res.TrustedPeer || res.CF["city"] != "Berlin" {
		t.Errorf("got %d %+v", resp.StatusCode, res)
	}
	resp, err = http.Get(srv.URL + "/?peer=nonsense")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad peer: %d, want 400", resp.StatusCode)
	}
}

func TestOpenGeoIPDirNotMaxMind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "GeoLite2-City.mmdb"), []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := requestcf.OpenGeoIPDir(dir)
	if err == nil || !strings.Contains(err.Error(), "GeoLite2-City.mmdb is not a MaxMind DB file") || !strings.Contains(err.Error(), "docs/request-cf.md") {
		t.Errorf("got %v, want an error naming the file and docs/request-cf.md", err)
	}
}
