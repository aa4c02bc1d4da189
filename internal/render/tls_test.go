package render_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// httpsClient presents cert/key (none when nil) and trusts namespace "default"'s CA.
func httpsClient(t *testing.T, ca, cert, key []byte) *http.Client {
	t.Helper()
	pool, err := internalca.Pool(ca)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: podcontract.InternalServerName("default")}
	if cert != nil {
		c, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names: the server must refuse it itself.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func status(hc *http.Client, method, u, body string) (int, error) {
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.ReadAll(res.Body)
	return res.StatusCode, nil
}

// With internal TLS, a Worker reaches its namespace's Durable Object shards over the
// mutual-TLS gateway; the gateway, rpc and trigger sockets refuse plain HTTP, callers
// without a certificate and callers holding another namespace's certificate; trigger
// admits the manager only.
func TestInternalTLSSockets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 workerd processes")
	}
	plane, err := internalca.NewPlane("default", "other")
	if err != nil {
		t.Fatal(err)
	}
	w, d := doFixture(t)
	d.UID = "5b0c1c4e-2f0a-4d43-9a51-6f1f0c2d7e10" // the API server sets it: the drain token derives from it
	ns, other := plane.Namespaces["default"], plane.Namespaces["other"]
	c := startDOClusterTLS(t, w, d, 1, ns)
	if got := c.mustGet(t, c.replicas[0], "/inc", url.Values{"name": {"tls"}}); got != "1" {
		t.Fatalf("increment through the TLS gateway: %q", got)
	}
	ca := ns[podcontract.InternalTLSCA]
	shard, replica := c.shards[0], c.replicas[0]
	refused := map[string][]byte{"no certificate": nil, "another namespace's certificate": other[podcontract.InternalTLSCert]}
	for _, sock := range []struct{ name, addr string }{
		{"gateway", shard.addr(podcontract.GatewaySocket)},
		{"rpc", replica.addr(podcontract.RPCSocket)},
		{"trigger", replica.addr(podcontract.TriggerSocket)},
	} {
		if code, err := status(&http.Client{Timeout: 5 * time.Second}, "GET", "http://"+sock.addr+"/", ""); err == nil {
			t.Errorf("%s: plain HTTP answered %d", sock.name, code)
		}
		for who, cert := range refused {
			if code, err := status(httpsClient(t, ca, cert, other[podcontract.InternalTLSKey]), "POST", "https://"+sock.addr+"/scheduled", `{"cron":"* * * * *","scheduledTime":0}`); err == nil {
				t.Errorf("%s with %s: answered %d", sock.name, who, code)
			}
		}
	}
	trigger := "https://" + replica.addr(podcontract.TriggerSocket) + "/scheduled"
	body := `{"cron":"* * * * *","scheduledTime":0}`
	if code, err := status(httpsClient(t, ca, ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey]), "POST", trigger, body); err == nil {
		t.Errorf("trigger with the namespace's certificate (not the manager's): answered %d", code)
	}
	if code, err := status(httpsClient(t, ca, plane.ManagerCert, plane.ManagerKey), "POST", trigger, body); err != nil || code != 200 {
		t.Errorf("trigger with the manager's certificate: %d %v", code, err)
	}
	if code, err := status(httpsClient(t, ca, ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey]), "GET", "https://"+replica.addr(podcontract.RPCSocket)+"/value?name=tls", ""); err != nil || code != 200 {
		t.Errorf("rpc with the namespace's certificate: %d %v", code, err)
	}
	checkHealthDrain(t, c, d)
}

// checkHealthDrain: a shard pod's preStop drain works over plain HTTP on the health
// socket (forwarded to the gateway) with the pod's drain token only (the hook's header);
// from anyone else, without it or with another, it is refused and drains nothing. A
// Worker pod's health socket has no drain. Call it last: the drained shard refuses
// sessions for 60 s.
func checkHealthDrain(t *testing.T, c *doCluster, d *v1alpha1.DurableObjectNamespace) {
	t.Helper()
	token := render.DrainToken(d)
	for _, tc := range []struct {
		name, addr, token, want string
		code                    int
	}{
		{"Worker pod", c.replicas[0].addr(podcontract.HealthSocket), token, "not found", 404},
		{"shard pod, no token", c.shards[0].addr(podcontract.HealthSocket), "", "forbidden", 403},
		{"shard pod, another token", c.shards[0].addr(podcontract.HealthSocket), strings.Repeat("0", len(token)), "forbidden", 403},
		{"shard pod, its token", c.shards[0].addr(podcontract.HealthSocket), token, "drained: 0 calls in flight", 200},
	} {
		req, _ := http.NewRequest("GET", "http://"+tc.addr+render.GatewayDrainPath, nil)
		if tc.token != "" {
			req.Header.Set(render.DrainTokenHeader, tc.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: drain on the health socket: %v", tc.name, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: drain on the health socket: %d %q, want %d %q", tc.name, res.StatusCode, b, tc.code, tc.want)
		}
	}
}
