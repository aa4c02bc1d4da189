package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// boxModule is a Durable Object class driving ctx.container directly with the calls
// @cloudflare/containers makes (start, monitor, getTcpPort().fetch, signal(15)); every
// answer is JSON. The container is the containers template's server.
const boxModule = `import { DurableObject } from "cloudflare:workers";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export class Box extends DurableObject {
  async fetch(req) {
    const u = new URL(req.url), c = this.ctx.container, out = {};
    switch (u.pathname) {
      case "/start": {
        const t0 = Date.now();
        if (!c.running) {
          c.start({ env: { MESSAGE: "box" }, enableInternet: false });
          this.exit = c.monitor().then(() => "exit 0", (e) => "rejected: " + e.message);
        }
        for (let i = 0; i < 1200 && out.body === undefined; i++) {
          try { out.body = await (await c.getTcpPort(8080).fetch("http://ping/")).text(); }
          catch (e) { out.err = e.message; await sleep(100); }
        }
        out.ms = Date.now() - t0;
        break;
      }
      case "/sleep":
        c.signal(15);
        out.exit = await Promise.race([this.exit, sleep(60000).then(() => "no exit within 60 s")]);
        break;
      case "/exit":
        out.exit = await Promise.race([this.exit ?? "never started", sleep(60000).then(() => "no exit within 60 s")]);
        break;
    }
    out.running = c.running;
    return Response.json(out);
  }
}
export default {
  fetch(req, env) {
    const box = new URL(req.url).searchParams.get("box") ?? "0";
    return env.BOX.get(env.BOX.idFromName(box)).fetch(req);
  },
};
`

type boxAnswer struct {
	Body, Err, Exit string
	Ms              int64
	Running         bool
}

// TestContainerInstancesAtScale: $CONTAINER_INSTANCES (default 50) objects each start a
// container at once, each answers from its own (the id in the server's answer),
// each sleeps (signal 15: its Pod is deleted and monitor() resolves), one crashes
// (its Pod killed: monitor() rejects with exit 137) and all start again. The cold
// start is reported.
func TestContainerInstancesAtScale(t *testing.T) {
	requireNode(t)
	n := 50
	if v, err := strconv.Atoi(os.Getenv("CONTAINER_INSTANCES")); err == nil && v > 0 {
		n = v
	}
	image, _, err := testenv.ServerImage(filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", "containers-template", "container_src"),
		registryHost+"/realnode/box-server:1")
	if err != nil {
		t.Fatal(err)
	}
	url := applyBoxes(t, image, n)
	starts := boxesDo(t, url, "/start", n)
	var ms []int64
	for i, a := range starts {
		if !a.Running || a.Body == "" {
			t.Errorf("box %d did not start: %+v", i, a)
		}
		ms = append(ms, a.Ms)
	}
	slices.Sort(ms)
	t.Logf("%d instances started at once: cold start p50 %d ms, p90 %d ms, max %d ms", n, ms[n/2], ms[n*9/10], ms[n-1])
	if pods := instancePods(t, "boxes-box"); len(pods) != n || t.Failed() {
		t.Fatalf("%d instance pods, want %d", len(pods), n)
	}
	crashOne(t, url, starts[0])
	for i, a := range boxesDo(t, url, "/sleep", n) {
		if a.Exit != "exit 0" || a.Running {
			t.Errorf("box %d after signal(15): %+v, want exit 0 and not running", i, a)
		}
	}
	eventually(t, 2*time.Minute, "every instance pod deleted", func() error {
		if p := instancePods(t, "boxes-box"); len(p) != 0 {
			return fmt.Errorf("%d left", len(p))
		}
		return nil
	})
	for i, a := range boxesDo(t, url, "/start", n) {
		if !a.Running || a.Body == "" {
			t.Errorf("box %d did not start again: %+v", i, a)
		}
	}
}

// crashOne kills box 0's Pod: its monitor() rejects with the exit code, 137 as for an
// OOM kill, and the next start runs a new Pod.
func crashOne(t *testing.T, url string, started boxAnswer) {
	t.Helper()
	target := podOf(t, instancePods(t, "boxes-box"), boxID(t, started))
	exit := make(chan boxAnswer, 1)
	go func() { exit <- boxAt(t, url, "/exit", 0) }()
	time.Sleep(time.Second) // the /exit call is waiting on monitor()
	if err := cluster.client.CoreV1().Pods(sampleNS).Delete(context.Background(), target, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if a := <-exit; a.Exit != "rejected: Container exited with unexpected exit code: 137" {
		t.Errorf("box 0's monitor() after its Pod was killed: %q", a.Exit)
	}
	if a := boxAt(t, url, "/start", 0); !a.Running || a.Body == "" {
		t.Errorf("box 0 not started again after the crash: %+v", a)
	}
}

func boxID(t *testing.T, a boxAnswer) string {
	t.Helper()
	m := boxAnswerID.FindStringSubmatch(a.Body)
	if m == nil {
		t.Fatalf("answer %q is not the server's", a.Body)
	}
	return m[1]
}

// boxesDo calls path on boxes 0..n-1 at once.
func boxesDo(t *testing.T, url, path string, n int) []boxAnswer {
	t.Helper()
	out := make([]boxAnswer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = boxAt(t, url, path, i) }()
	}
	wg.Wait()
	return out
}

// boxClient waits as long as a box's own loops (a start polls its port for 120 s).
var boxClient = &http.Client{Timeout: 3 * time.Minute}

func boxAt(t *testing.T, url, path string, i int) boxAnswer {
	var a boxAnswer
	body, err := getWith(boxClient, fmt.Sprintf("%s%s?box=%d", url, path, i))
	if err == nil {
		err = json.Unmarshal([]byte(body), &a)
	}
	if err != nil {
		t.Errorf("box %d %s: %v", i, path, err)
	}
	return a
}

// applyBoxes applies the Worker and its DurableObjectNamespace (spec.container: the
// image, maxInstances n; objects never evicted, so each keeps its monitor()).
func applyBoxes(t *testing.T, image string, n int) string {
	t.Helper()
	dons := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleetGroup + "/v1alpha1", "kind": "DurableObjectNamespace",
		"metadata": map[string]any{"name": "boxes-box", "namespace": sampleNS},
		"spec": map[string]any{"workerRef": map[string]any{"name": "boxes"}, "className": "Box", "preventEviction": true,
			"container": map[string]any{"image": image, "maxInstances": int64(n)}},
	}}
	removeAtEnd(t, []*unstructured.Unstructured{dons})
	if err := cluster.apply(context.Background(), []*unstructured.Unstructured{dons}, time.Minute); err != nil {
		t.Fatal(err)
	}
	return applyWorker(t, "boxes", map[string]any{
		"bindings": []any{map[string]any{"name": "BOX", "durableObjectNamespace": map[string]any{"name": "boxes-box"}}},
		"source": map[string]any{"inline": map[string]any{"modules": []any{
			map[string]any{"name": "boxes.js", "type": "ESModule", "content": boxModule}}}},
	})
}
