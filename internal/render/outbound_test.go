package render_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// outboundWorker fetches ?u=, or talks a line protocol over connect() to ?a= (plain, or
// STARTTLS: "STARTTLS" then TLS once the peer answers "OK"), and reports what it saw.
const outboundWorker = `import { connect } from "cloudflare:sockets";
async function line(reader) {
  const { value } = await reader.read();
  return new TextDecoder().decode(value).trim();
}
export default {
  async fetch(request) {
    const q = new URL(request.url).searchParams;
    try {
      if (q.has("noop")) return new Response("noop");
      if (q.has("u")) return new Response("fetch " + (await (await fetch(q.get("u"))).text()));
      const starttls = q.has("starttls");
      let socket = connect(q.get("a"), starttls ? { secureTransport: "starttls" } : {});
      let w = socket.writable.getWriter(), r = socket.readable.getReader();
      let prefix = "tcp";
      if (starttls) {
        await w.write(new TextEncoder().encode("STARTTLS\n"));
        if ((await line(r)) !== "OK") throw new Error("no OK");
        w.releaseLock(); r.releaseLock();
        socket = socket.startTls();
        w = socket.writable.getWriter(); r = socket.readable.getReader();
        prefix = "tls";
      }
      await w.write(new TextEncoder().encode("ping\n"));
      const got = await line(r);
      await socket.close();
      return new Response(prefix + " " + got);
    } catch (e) {
      return new Response("error " + e.message);
    }
  },
};
`

// echoServer answers every line with "echo <line>"; with tlsConf it first waits for
// "STARTTLS", answers "OK" and continues over TLS.
func echoServer(t *testing.T, addr string, tlsConf *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveEcho(c, tlsConf)
		}
	}()
	return ln.Addr().String()
}

func serveEcho(c net.Conn, tlsConf *tls.Config) {
	defer c.Close()
	rd := bufio.NewReader(c)
	if tlsConf != nil {
		if l, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(l) != "STARTTLS" {
			return
		}
		if _, err := io.WriteString(c, "OK\n"); err != nil {
			return
		}
		tc := tls.Server(c, tlsConf)
		c, rd = tc, bufio.NewReader(tc)
	}
	for {
		l, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, "echo "+l); err != nil {
			return
		}
	}
}

// startOutboundWorker renders a Worker with spec.outbound o and the operator defaults
// def, and runs it in the pinned workerd with env.
func startOutboundWorker(t testing.TB, o *v1alpha1.OutboundSpec, def outbound.Rules, env []string) (*localrun.Local, string) {
	t.Helper()
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "out", Namespace: "ns"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-06-01", Outbound: o,
		Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{
			{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(outboundWorker)}}}},
	}}
	out, err := render.Render(render.Input{Worker: w, Options: render.Options{Outbound: def}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l, "http://" + l.Addrs[podcontract.HTTPSocket] + "/?"
}

func getBody(t testing.TB, u string) string {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestOutboundWorkerd: what spec.outbound allows the pinned workerd connects to, with
// fetch() and with connect() (plain and STARTTLS,
// https://developers.cloudflare.com/workers/runtime-apis/tcp-sockets/); what it denies
// fails, and workerd's log line says so and classifies as outbound_denied.
func TestOutboundWorkerd(t *testing.T) {
	allowedHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "from allowed") }))
	defer allowedHTTP.Close()
	deniedAddr, err := localrun.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	denied := &httptest.Server{Listener: mustListen(t, deniedAddr), Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "from denied") })}}
	denied.Start()
	defer denied.Close()
	echo := echoServer(t, "127.0.0.1:0", nil)
	tlsConf, caFile := selfSignedTLS(t)
	starttls := echoServer(t, "127.0.0.1:0", tlsConf)

	// The author allows 127.0.0.1 only; the admin's default would allow all loopback.
	l, base := startOutboundWorker(t, &v1alpha1.OutboundSpec{Allow: []string{"127.0.0.1"}},
		outbound.Rules{Allow: []string{outbound.Local}}, []string{"SSL_CERT_FILE=" + caFile})
	cases := []struct{ query, want string }{
		{"u=" + url.QueryEscape(allowedHTTP.URL), "fetch from allowed"},
		{"a=" + echo, "tcp echo ping"},
		{"starttls=1&a=" + strings.Replace(starttls, "127.0.0.1", "localhost", 1), "tls echo ping"},
	}
	for _, c := range cases {
		if got := getBody(t, base+c.query); got != c.want {
			t.Errorf("%s: got %q, want %q\n%s", c.query, got, c.want, l.Output())
		}
	}
	// Denied: fetch() and connect() to an address outside the allow list.
	for _, q := range []string{"u=" + url.QueryEscape(denied.URL), "a=" + deniedAddr} {
		if got := getBody(t, base+q); !strings.HasPrefix(got, "error ") || strings.Contains(got, "from denied") {
			t.Errorf("%s: got %q, want an error", q, got)
		}
	}
	host := strings.TrimPrefix(denied.URL, "http://")
	waitForLog(t, func() bool { return strings.Contains(l.Output(), "connecting to "+host+" is not allowed") }, l.Output)
	for _, line := range strings.Split(l.Output(), "\n") {
		if strings.Contains(line, "is not allowed") {
			if c := failure.ClassifyMessage(line); c != failure.CauseOutboundDenied {
				t.Errorf("log line %q classified as %q, want %q", line, c, failure.CauseOutboundDenied)
			}
		}
	}
}

func mustListen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func waitForLog(t *testing.T, ok func() bool, out func() string) {
	t.Helper()
	for i := 0; i < 100 && !ok(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !ok() {
		t.Fatalf("log line not seen:\n%s", out())
	}
}

// selfSignedTLS is a server certificate for localhost issued by a fresh CA, and a PEM
// file of that CA (workerd's trustBrowserCas store honours SSL_CERT_FILE).
func selfSignedTLS(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outbound test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}, ca
}

// BenchmarkOutboundFetch compares, in one run, a GET of a local HTTP server by a plain Go
// client (direct) with the same GET made by a Worker's fetch() through the rendered
// network service (via-workerd: Go client -> workerd -> fetch -> server), and the
// workerd hop alone (workerd-noop: the Worker answers without fetching). The outbound
// path's own cost is about via-workerd minus workerd-noop. Metrics: p50-us, p99-us.
//
//	go test ./internal/render -run '^$' -bench OutboundFetch -benchtime 2000x
func BenchmarkOutboundFetch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") }))
	defer srv.Close()
	_, base := startOutboundWorker(b, &v1alpha1.OutboundSpec{Allow: []string{"127.0.0.1"}}, outbound.Rules{Allow: []string{outbound.Local}}, nil)
	for _, tc := range []struct{ name, url, want string }{
		{"direct", srv.URL, "pong"},
		{"workerd-noop", base + "noop=1", "noop"},
		{"via-workerd", base + "u=" + url.QueryEscape(srv.URL), "fetch pong"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if got := getBody(b, tc.url); got != tc.want {
					b.Fatalf("got %q, want %q", got, tc.want)
				}
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
		})
	}
}
