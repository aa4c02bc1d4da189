package render_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// startCollector runs the OpenTelemetry Collector's OTLP receiver (HTTP) on a free
// loopback address into a TracesSink; it returns the traces URL and the sink.
func startCollector(t *testing.T) (string, *consumertest.TracesSink) {
	t.Helper()
	addr := testenv.FreeLoopbackAddr(t)
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = testenv.FreeLoopbackAddr(t)
	sink := new(consumertest.TracesSink)
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return "http://" + addr + "/v1/traces", sink
}

// span is one received span with its service.
type span struct {
	service, name, id, parent, trace string
}

func received(sink *consumertest.TracesSink) []span {
	var out []span
	for _, td := range sink.AllTraces() {
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for j := range rs.ScopeSpans().Len() {
				ss := rs.ScopeSpans().At(j).Spans()
				for k := range ss.Len() {
					s := ss.At(k)
					out = append(out, span{svc.Str(), s.Name(), s.SpanID().String(), s.ParentSpanID().String(), s.TraceID().String()})
				}
			}
		}
	}
	return out
}

// One request to the pinned workerd reaches the Collector as a trace: the invocation
// span (service: the Worker's name), its service-binding subrequest span, and the
// invocation that subrequest made, as the subrequest's child.
func TestOTLPTrace(t *testing.T) {
	url, sink := startCollector(t)
	otlp, err := telemetry.NewOTLP(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	addr := startSidecarWith(t, sidecar.Options{Logs: io.Discard, TailSinks: []func(*telemetry.Record){otlp.Sink}})
	w := inlineWorker("app", `export default {
  async fetch(req, env) {
    if (new URL(req.url).pathname === "/inner") return new Response("inner");
    return new Response(await (await env.SELF.fetch("http://self/inner")).text());
  },
};`)
	w.Spec.Bindings = []v1alpha1.Binding{{Name: "SELF", Service: &v1alpha1.ServiceBinding{Name: "app"}}}
	l := startRendered(t, render.Input{Worker: w}, addr)
	res, err := http.Get("http://" + l.Addrs[podcontract.HTTPSocket] + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var spans []span
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if spans = received(sink); len(spans) >= 3 {
			break
		}
	}
	checkTrace(t, spans)
}

func checkTrace(t *testing.T, spans []span) {
	t.Helper()
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.id] = s
	}
	var outer, sub, inner *span
	for i, s := range spans {
		switch p, hasParent := byID[s.parent]; {
		case s.name == "fetch" && !hasParent && s.parent == "" && outer == nil:
			outer = &spans[i]
		case s.name == "fetch" && hasParent && p.parent == "":
			sub = &spans[i]
		case s.name == "fetch" && hasParent && p.parent != "":
			inner = &spans[i]
		}
	}
	if outer == nil || sub == nil || inner == nil {
		t.Fatalf("want invocation → subrequest → invocation, got %+v", spans)
	}
	if outer.service != "app" || sub.service != "app" || inner.service != "app" || outer.trace != inner.trace ||
		sub.parent != outer.id || inner.parent != sub.id {
		t.Errorf("trace %+v / %+v / %+v", *outer, *sub, *inner)
	}
}
