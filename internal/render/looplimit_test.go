package render_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// LoopWorker forwards its own request (fetch(request): on Cloudflare that goes to the
// origin, here to the Worker itself) and answers the inner answer's status and body,
// with X-Hops listing the CF-EW-Via count each invocation saw, outermost first.
const LoopWorker = `export default {
  async fetch(request) {
    const seen = request.headers.get("CF-EW-Via");
    const r = await fetch(request);
    const inner = r.headers.get("X-Hops");
    return new Response(r.body, { status: r.status,
      headers: { "X-Hops": inner ? seen + "," + inner : seen } });
  },
};
`

// TestLoopLimitWorkerd: a Worker that calls itself through its http socket stops after
// 16 invocations with error 1019
// (https://developers.cloudflare.com/workers/observability/errors/#loop-limit): each
// invocation saw one fewer left (15 down to 0), the 17th is answered by the ingress
// shim; a client's CF-EW-Via cannot lengthen the chain, and one saying none is left
// gets 1019 without invoking the Worker.
func TestLoopLimitWorkerd(t *testing.T) {
	l := startLoopWorker(t)
	base := "http://" + l.Addrs[podcontract.HTTPSocket] + "/loop"
	n := int(limits.Get(limits.DefaultProfile, limits.LoopInvocations))
	var want []string
	for i := n - 1; i >= 0; i-- {
		want = append(want, strconv.Itoa(i))
	}
	cases := []struct {
		name, via string
		status    int
		hops      string
	}{
		{"no header", "", render.LoopLimitStatus, strings.Join(want, ",")},
		{"client claims more than the limit", "1000", render.LoopLimitStatus, strings.Join(want, ",")},
		{"client claims 3 left", "3", render.LoopLimitStatus, "2,1,0"},
		{"client claims none left", "0", render.LoopLimitStatus, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, base, nil)
			if c.via != "" {
				req.Header.Set("CF-EW-Via", c.via)
			}
			resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || string(body) != "error code: 1019" || resp.Header.Get("X-Hops") != c.hops {
				t.Errorf("got %d %q X-Hops %q, want %d %q X-Hops %q\n%s", resp.StatusCode, body, resp.Header.Get("X-Hops"),
					c.status, "error code: 1019", c.hops, l.Output())
			}
		})
	}
}

func startLoopWorker(t *testing.T) *localrun.Local {
	t.Helper()
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "loop", Namespace: "ns"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-06-01",
		Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{
			{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(LoopWorker)}}}},
	}}
	out, err := render.Render(render.Input{Worker: w, Options: render.Options{Outbound: outbound.Rules{Allow: []string{outbound.Local}}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}
