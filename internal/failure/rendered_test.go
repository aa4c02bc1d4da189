package failure

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// podIPArg matches the "$(POD_IP):<port>" of the pod's workerd args, which the kubelet
// expands from the downward API (docs/pod-contract.md).
var podIPArg = regexp.MustCompile(`\$\(POD_IP\):\d+`)

// TestRenderedWorkerTerminations renders real Worker objects with the operator's
// renderer, runs workerd with the pod's args (POD_IP = 127.0.0.1, fresh ports) and
// classifies how it died: a module that throws at startup, and a Worker at the
// smallest spec.limits.memoryMiB (16, the API minimum) that allocates without bound.
func TestRenderedWorkerTerminations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		request bool
		want    Cause
		wantIn  string
	}{
		{
			name: "module throws at startup",
			yaml: `apiVersion: fleet.workerd-operator.io/v1alpha1
kind: Worker
metadata: {name: kaboom, namespace: default}
spec:
  compatibilityDate: "2025-06-01"
  source:
    inline:
      modules:
      - name: worker.js
        type: ESModule
        content: |
          throw new Error("startup kaboom");
`,
			want:   CauseStartupError,
			wantIn: "service kaboom: Uncaught Error: startup kaboom",
		},
		{
			name: "memoryMiB 16 exhausted",
			yaml: `apiVersion: fleet.workerd-operator.io/v1alpha1
kind: Worker
metadata: {name: hog, namespace: default}
spec:
  compatibilityDate: "2025-06-01"
  limits:
    profile: custom
    memoryMiB: 16
  source:
    inline:
      modules:
      - name: worker.js
        type: ESModule
        content: |
          export default { async fetch() { const a = []; for (;;) a.push(new Array(100000).fill(Math.random())); } };
`,
			request: true,
			want:    CauseOOM,
			wantIn:  "JavaScript heap out of memory",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m localrun.Manifests
			if err := localrun.DecodeManifests(strings.NewReader(tc.yaml), tc.name, &m); err != nil {
				t.Fatal(err)
			}
			if len(m.Workers) != 1 {
				t.Fatalf("%d Workers decoded", len(m.Workers))
			}
			w := m.Workers[0]
			out, err := render.Render(render.Input{Worker: w})
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{}
			for _, f := range out.Files {
				files[f.Path] = f.Data
			}
			// The pod's args, with the config path of this directory and $(POD_IP)
			// expanded to loopback addresses on free ports.
			var args []string
			httpAddr := ""
			for _, a := range render.Args(w) {
				switch {
				case a == "serve":
					continue
				case strings.HasSuffix(a, "/"+podcontract.ConfigFile):
					continue // startWorkerd passes config.capnp in its directory
				case podIPArg.MatchString(a):
					addr := testenv.FreeLoopbackAddr(t)
					if strings.HasPrefix(a, "--socket-addr="+podcontract.HTTPSocket+"=") {
						httpAddr = addr
					}
					a = podIPArg.ReplaceAllString(a, addr)
				}
				args = append(args, a)
			}
			r := startWorkerdFiles(t, files, args...)
			if tc.request {
				r.waitHTTP(t, httpAddr)
				ctx, cancel := context.WithTimeout(context.Background(), guard)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					t.Fatalf("the allocation loop answered %d; workerd should have aborted", resp.StatusCode)
				}
			}
			r.wait(t)
			tm := r.termination(t)
			if tm.ExitCode == 0 && tm.Signal == 0 {
				t.Fatalf("workerd exited 0; output:\n%s%s", r.stdout.String(), r.stderr.String())
			}
			cause, evidence := Diagnose(tm)
			t.Logf("exit code %d, signal %d; cause %s; evidence %q", tm.ExitCode, tm.Signal, cause, evidence)
			if cause != tc.want || !strings.Contains(evidence, tc.wantIn) {
				t.Errorf("cause %s evidence %q, want %s with %q; termination message:\n%s", cause, evidence, tc.want, tc.wantIn, tm.Message)
			}
		})
	}
}
