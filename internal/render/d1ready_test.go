package render_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestD1ReadinessSaysNotReadyOnly: a D1 host whose migration fails answers its
// unauthenticated /readyz (reachable from any namespace) with "not ready" and no detail
// of the database: neither the migration file nor the SQLite error. Those go to the
// workerd container's log.
func TestD1ReadinessSaysNotReadyOnly(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	sidecar := healthySidecar(t)
	const file, secretSQL = "7_add_salaries.sql", "INSERT INTO salaries_of_the_board VALUES (1);"
	h := render.DataHost{Kind: render.DataD1, Namespace: "default", Name: "db", Migrations: []render.Migration{{Name: file, SQL: secretSQL}}}
	var log syncBuf
	l := startHostLogged(t, bin, t.TempDir(), render.Input{Worker: render.DataHostWorker(h), DataHost: &h},
		map[string]string{podcontract.SidecarService: sidecar}, &log)
	var status int
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + l.Addrs[podcontract.HealthSocket] + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, body = resp.StatusCode, string(b)
			if strings.Contains(log.String(), "salaries_of_the_board") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready") {
		t.Fatalf("/readyz: %d %q, want 503 \"not ready...\"", status, body)
	}
	for _, secret := range []string{file, "salaries_of_the_board", "SQLITE"} {
		if strings.Contains(body, secret) {
			t.Errorf("/readyz body %q tells %q to any caller", body, secret)
		}
	}
	if out := log.String(); !strings.Contains(out, file) || !strings.Contains(out, "salaries_of_the_board") {
		t.Errorf("workerd's log lacks the failed migration and its error:\n%s", out)
	}
}

// healthySidecar is a plain server answering the sidecar's documented GET /healthz 200.
func healthySidecar(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
