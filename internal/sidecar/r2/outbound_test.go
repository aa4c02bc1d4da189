package r2_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestGatewayObeysOutbound: the R2 gateway dials the store under the Worker's outbound
// rules (spec.outbound within the admin's policy, docs/outbound.md), as workerd's
// network service would dial for the Worker itself: an R2Bucket whose endpoint the
// rules do not allow (here a store on loopback under allow [public], as instance
// metadata at 169.254.169.254 is under the default) is refused at connect time, with
// the refusal in the sidecar's log; the same store under allow [local] answers.
func TestGatewayObeysOutbound(t *testing.T) {
	s3 := testenv.StartS3(t, bucketName)
	src := `export default { async fetch(req, env) {
  try { await env.BUCKET.put("k", "v"); return new Response("stored"); }
  catch (e) { return new Response("refused: " + e.message, { status: 500 }); }
} };`
	w := sidecartest.InlineWorker("r2guard", src, v1alpha1.Binding{Name: "BUCKET", R2Bucket: &v1alpha1.LocalObjectReference{Name: bucketName}})
	out, err := render.Render(render.Input{Worker: w, R2Buckets: map[string]render.R2BucketTarget{
		bucketName: {Endpoint: s3.Endpoint, Bucket: bucketName, SecretName: "s3-credentials"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rules  outbound.Rules
		stored bool
	}{{outbound.Rules{Allow: []string{outbound.Public}}, false}, {outbound.Rules{Allow: []string{outbound.Local}}, true}} {
		t.Run(strings.Join(c.rules.Allow, ","), func(t *testing.T) {
			var mu sync.Mutex
			var logs []string
			logf := func(format string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(format, a...)); mu.Unlock() }
			addr := sidecartest.StartSidecar(t, sidecartest.Sidecar{S3: s3, Buckets: []string{bucketName}, Outbound: &c.rules, Logf: logf})
			res, err := http.Get(sidecartest.StartWorker(t, addr, w, out) + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body := string(b)
			mu.Lock()
			defer mu.Unlock()
			refused := strings.Contains(strings.Join(logs, "\n"), "is not allowed")
			if (body == "stored") != c.stored || refused == c.stored {
				t.Errorf("under %+v: Worker answered %q, sidecar log %q; want stored=%v", c.rules, body, logs, c.stored)
			}
		})
	}
}
