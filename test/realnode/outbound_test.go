package realnode

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reacherModule fetches ?u= or exchanges a line with the TCP peer ?a= over connect()
// (cloudflare:sockets), and says what it got or the error it caught.
const reacherModule = `import { connect } from "cloudflare:sockets";
export default {
  async fetch(request) {
    const q = new URL(request.url).searchParams;
    try {
      if (q.has("u")) {
        const r = await fetch(q.get("u"));
        return new Response("fetch " + r.status + " " + (await r.text()));
      }
      const s = connect(q.get("a"));
      const w = s.writable.getWriter();
      await w.write(new TextEncoder().encode("GET /healthz HTTP/1.0\r\n\r\n"));
      const { value } = await s.readable.getReader().read();
      return new Response("tcp " + new TextDecoder().decode(value));
    } catch (e) {
      return new Response("error " + e.message);
    }
  },
};
`

// TestOutboundAddressForms: the pod's loopback (its sidecar's pod-internal API on
// 127.0.0.1:9092) is outside the operator's default outbound allow list, and no
// spelling of it gets a Worker there on the real node: IPv4-mapped and -compatible IPv6,
// the unspecified addresses (which Linux connects to the local host), and the decimal,
// hexadecimal and octal IPv4 literals URLs accept, by fetch() and by connect(). The
// same Worker reaches the hello sample by its cluster name, so a refusal is the policy's.
func TestOutboundAddressForms(t *testing.T) {
	requireNode(t)
	base := applyWorker(t, "reacher", map[string]any{"source": map[string]any{"inline": map[string]any{"modules": []any{
		map[string]any{"name": "worker.js", "type": "ESModule", "content": reacherModule},
	}}}}) + "/?"
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(context.Background(), "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port, _ := httpPort(svc)
	hello := fmt.Sprintf("http://hello.%s.svc.cluster.local:%d/allowed", sampleNS, port.Port)
	eventually(t, time.Minute, "fetch of the hello sample", func() error {
		got, err := get(base + "u=" + url.QueryEscape(hello))
		if err != nil || !strings.HasPrefix(got, "fetch 200 Hello from workerd-operator!") {
			return fmt.Errorf("got %q, %v", got, err)
		}
		return nil
	})
	for _, u := range []string{
		"http://127.0.0.1:9092/healthz",
		"http://[::ffff:127.0.0.1]:9092/healthz",
		"http://[::ffff:7f00:1]:9092/healthz",
		"http://[::127.0.0.1]:9092/healthz",
		"http://0.0.0.0:9092/healthz",
		"http://[::]:9092/healthz",
		"http://2130706433:9092/healthz",
		"http://0x7f.1:9092/healthz",
		"http://017700000001:9092/healthz",
		"http://localhost:9092/healthz",
	} {
		if got, err := get(base + "u=" + url.QueryEscape(u)); err != nil || !strings.HasPrefix(got, "error ") {
			t.Errorf("fetch %s: got %q, %v; want an error (denied)", u, got, err)
		}
	}
	for _, a := range []string{"127.0.0.1:9092", "[::ffff:127.0.0.1]:9092", "0.0.0.0:9092", "[::]:9092", "localhost:9092"} {
		if got, err := get(base + "a=" + url.QueryEscape(a)); err != nil || !strings.HasPrefix(got, "error ") {
			t.Errorf("connect %s: got %q, %v; want an error (denied)", a, got, err)
		}
	}
}
