package render_test

// Hostile review of Shared user Workers: the rendered dispatch Worker runs on the
// pinned workerd with a real sidecar dispatcher and the manager's real code handler
// (over plain HTTP, a fixed caller namespace), so the shim, the loader and the
// user-workers network service are the ones a pod runs.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/scheme"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/dispatch"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

const hostilePlatform = `
export default {
  async fetch(request, env) {
    const u = new URL(request.url);
    const q = u.searchParams;
    const d = env.dispatcher;
    try {
      switch (u.pathname) {
      case "/methods":
        return Response.json(Object.getOwnPropertyNames(Object.getPrototypeOf(d)));
      case "/forge": {
        const h = { "X-Workerd-Operator-Dispatch-Script": q.get("name"), "X-Workerd-Operator-Dispatch-Resolve": "1" };
        if (q.get("dns")) h["X-Workerd-Operator-Dispatch-Namespace"] = q.get("dns");
        const r = await d.forward(new Request("http://dispatch/", { headers: h }));
        return new Response(r.status + " " + await r.text());
      }
      case "/pollute": {
        const orig = Response.prototype.json;
        Response.prototype.json = async function () {
          const v = await orig.call(this);
          if (v && v.modules) {
            globalThis.__stolen = JSON.stringify(v.env);
            v.modules = [{ name: v.mainModule, type: "js", content: "export default { fetch() { return new Response('POLLUTED') } }" }];
          }
          return v;
        };
        const r = await d.get(q.get("name")).fetch("https://x.example/");
        Response.prototype.json = orig;
        return new Response("got " + await r.text() + " stole " + globalThis.__stolen);
      }
      case "/poison": {
        const { known } = await d.where(q.get("name"));
        const w = d.load(q.get("name"), known.etag, { placement: "Shared", compatibilityDate: "2025-01-01", mainModule: "w.js",
          modules: [{ name: "w.js", type: "js", content: "export default { fetch() { return new Response('POISONED') } }" }] });
        const r = await w.getEntrypoint().fetch("http://x/");
        return new Response("loaded " + await r.text());
      }
      default: {
        const name = u.pathname.split("/")[1];
        const rest = u.pathname.slice(name.length + 1) + u.search;
        const r = await d.get(name).fetch(new Request("https://" + name + ".example" + rest, request));
        return r;
      }
      }
    } catch (e) {
      return new Response("caught: " + e.message, { status: 599 });
    }
  },
};
`

// prober fetch()es or connect()s what it is told and says what happened.
const prober = `
import { connect } from "cloudflare:sockets";
export default {
  async fetch(request, env) {
    const q = new URL(request.url).searchParams;
    if (q.has("u")) {
      try {
        const r = await fetch(q.get("u"));
        return new Response("fetch " + r.status + " " + (await r.text()).slice(0, 200));
      } catch (e) { return new Response("error " + e.message); }
    }
    if (q.has("c")) {
      try {
        const s = connect(q.get("c"));
        await s.opened;
        const w = s.writable.getWriter();
        await w.write(new TextEncoder().encode("GET / HTTP/1.0\r\n\r\n"));
        const r = s.readable.getReader();
        const { value } = await r.read();
        return new Response("connected " + new TextDecoder().decode(value).slice(0, 60));
      } catch (e) { return new Response("error " + e.message); }
    }
    return new Response("prober env " + JSON.stringify(env) + " globals " + typeof globalThis.__platform);
  },
};
`

type countingReader struct {
	client.Reader
	n atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func hostileUser(name, dns string, p v1alpha1.DispatchPlacement, code string, flags ...string) *v1alpha1.Worker {
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: "sites", Name: name}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-01-01", CompatibilityFlags: flags, DispatchNamespace: dns, DispatchPlacement: p,
		Bindings: []v1alpha1.Binding{{Name: "SECRET", Text: ptr.To(name + "-secret")}},
		Source:   v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(code)}}}},
	}}
	return w
}

type hostileEnv struct {
	base    string
	mgrHits atomic.Int32
	cms     *countingReader
	sidecar string
	mgr     string
}

func startHostile(t *testing.T, objs ...client.Object) *hostileEnv {
	t.Helper()
	e := &hostileEnv{}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	e.cms = &countingReader{Reader: c}
	h := &userworkers.Handler{Workers: c, ConfigMaps: e.cms, Log: logr.Discard()}
	mgr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mgrHits.Add(1)
		h.ServeNamespace(w, r, "sites")
	}))
	t.Cleanup(mgr.Close)
	e.mgr = mgr.URL
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.HandleMarked(podcontract.DispatchNamespaceHeader, dispatch.New(dispatch.Options{Domain: "sites.svc.cluster.local",
		Code: &userworkers.Client{Base: mgr.URL, HTTP: &http.Client{Timeout: 10 * time.Second}}, Logf: t.Logf}))
	srv.Handle(podcontract.RequestCFPath, requestcf.Handler(&requestcf.Config{}, t.Logf))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	e.sidecar = srv.Addr()
	w := sidecartest.InlineWorker("platform", hostilePlatform,
		v1alpha1.Binding{Name: "dispatcher", DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: "customers"}},
		v1alpha1.Binding{Name: "PLATFORM_SECRET", Text: ptr.To("platform-secret")})
	w.Namespace = "sites"
	out, err := render.Render(render.Input{Worker: w, Options: render.Options{Outbound: outbound.Rules{Allow: outbound.DefaultAllow}}})
	if err != nil {
		t.Fatal(err)
	}
	e.base = sidecartest.StartWorker(t, e.sidecar, w, out)
	return e
}

func hget(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostileSharedEgress probes what a Shared user Worker's fetch() and connect()
// reach from inside the dispatch Worker's process.
func TestHostileSharedEgress(t *testing.T) {
	e := startHostile(t, hostileUser("probe", "customers", v1alpha1.DispatchPlacementShared, prober))
	// Listeners the isolate must not reach.
	ln4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln4.Close() })
	go http.Serve(ln4, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "REACHED-v4") }))
	_, p4, _ := net.SplitHostPort(ln4.Addr().String())
	var p6 string
	if ln6, err := net.Listen("tcp", "[::1]:0"); err == nil {
		t.Cleanup(func() { ln6.Close() })
		go http.Serve(ln6, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "REACHED-v6") }))
		_, p6, _ = net.SplitHostPort(ln6.Addr().String())
	}
	mgr, _ := url.Parse(e.mgr)
	targets := []string{
		"http://127.0.0.1:" + p4 + "/",
		"http://localhost:" + p4 + "/",
		"http://127.1:" + p4 + "/",
		"http://2130706433:" + p4 + "/",
		"http://0x7f000001:" + p4 + "/",
		"http://0177.0.0.1:" + p4 + "/",
		"http://0.0.0.0:" + p4 + "/",
		"http://[::ffff:127.0.0.1]:" + p4 + "/",
		"http://[::ffff:7f00:1]:" + p4 + "/",
		"http://[::127.0.0.1]:" + p4 + "/",
		"http://[::]:" + p4 + "/",
		"http://" + e.sidecar + "/",
		"http://" + mgr.Host + userworkers.Path + "customers/probe",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.96.0.1:443/",
	}
	if p6 != "" {
		targets = append(targets, "http://[::1]:"+p6+"/", "http://[0:0:0:0:0:0:0:1]:"+p6+"/")
	}
	for _, u := range targets {
		_, body := hget(t, e.base+"/probe/?u="+url.QueryEscape(u))
		t.Logf("fetch %s -> %s", u, body)
		if strings.Contains(body, "REACHED") || strings.HasPrefix(body, "fetch ") {
			t.Errorf("Shared user Worker reached %s: %s", u, body)
		}
	}
	for _, a := range []string{"127.0.0.1:" + p4, "localhost:" + p4, "[::ffff:127.0.0.1]:" + p4, e.sidecar, "0.0.0.0:" + p4} {
		_, body := hget(t, e.base+"/probe/?c="+url.QueryEscape(a))
		t.Logf("connect %s -> %s", a, body)
		if strings.HasPrefix(body, "connected") {
			t.Errorf("Shared user Worker connect()ed to %s: %s", a, body)
		}
	}
	_, body := hget(t, e.base+"/probe/")
	t.Logf("env: %s", body)
	if strings.Contains(body, "platform-secret") {
		t.Errorf("Shared user Worker sees the platform's env: %s", body)
	}
}

// TestHostileSharedPlatformForge: the dispatch Worker calls the shim's public methods
// directly, bypassing get().fetch()'s header stripping.
func TestHostileSharedPlatformForge(t *testing.T) {
	e := startHostile(t,
		hostileUser("site-a", "customers", v1alpha1.DispatchPlacementShared, `export default { fetch() { return new Response("site-a genuine") } }`),
		hostileUser("other-x", "others", v1alpha1.DispatchPlacementShared, `export default { fetch() { return new Response("other-x") } }`),
		hostileUser("site-b", "customers", v1alpha1.DispatchPlacementShared, `export default { fetch() { return new Response("site-b genuine") } }`),
		hostileUser("ded", "customers", "", `export default {}`))
	_, methods := hget(t, e.base+"/methods")
	t.Logf("env.dispatcher's methods: %s", methods)
	_, body := hget(t, e.base+"/forge?name=site-a")
	t.Logf("forge resolve site-a: %.200s", body)
	if strings.Contains(body, "site-a-secret") {
		t.Errorf("the dispatch Worker read a user Worker's code and env via forward(): %.200s", body)
	}
	_, body = hget(t, e.base+"/forge?name=other-x&dns=others")
	t.Logf("forge resolve other-x of another dispatch namespace: %.200s", body)
	if strings.Contains(body, "other-x-secret") {
		t.Errorf("the dispatch Worker read another dispatch namespace's user Worker via a forged namespace header: %.200s", body)
	}
	// The binding's module runs in the dispatch Worker's isolate: that Worker can still
	// reach its user Workers' code by replacing builtins the module uses. It is the
	// platform's code, trusted with them (docs/dispatch.md, Shared placement).
	// Poison before the first genuine call.
	_, body = hget(t, e.base+"/poison?name=site-a")
	t.Logf("poison: %s", body)
	_, body = hget(t, e.base+"/site-a/")
	t.Logf("site-a after poison: %s", body)
	if body == "POISONED" {
		t.Errorf("the dispatch Worker replaced site-a's isolate through the shim's load(): get(\"site-a\").fetch() answers %q", body)
	}
}

// TestHostileSharedUnsafeModule: a Shared user Worker with an experimental flag in a
// process run with --experimental.
func TestHostileSharedUnsafeModule(t *testing.T) {
	code := `import unsafe from "workerd:unsafe";
export default { async fetch() { return new Response("unsafe: " + Object.keys(unsafe).join(",")) } }`
	e := startHostile(t, hostileUser("uns", "customers", v1alpha1.DispatchPlacementShared, code, "unsafe_module"))
	_, body := hget(t, e.base+"/uns/")
	t.Logf("unsafe module in a Shared isolate: %s", body)
	if strings.HasPrefix(body, "unsafe: ") {
		t.Errorf("a Shared user Worker imports workerd:unsafe inside the dispatch Worker's process: %s", body)
	}
}
