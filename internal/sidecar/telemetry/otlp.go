package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// OTLP exports every record as spans over OTLP/HTTP: one span for the invocation (the
// Worker's name is the service) and one per span it opened (subrequests, binding calls),
// with workerd's trace and span ids. Records queue up to otlpQueue; beyond that (a slow
// or unreachable collector) they are dropped rather than slowing the Worker's pod.
type OTLP struct {
	spans  chan []sdktrace.ReadOnlySpan
	done   chan struct{}
	export func(context.Context, []sdktrace.ReadOnlySpan) error
}

const (
	otlpQueue = 1024
	otlpBatch = 512
	otlpEvery = time.Second
)

// NewOTLP exports to endpoint, the OTLP/HTTP traces URL (e.g.
// http://otel-collector.monitoring:4318/v1/traces). Close flushes and stops it.
func NewOTLP(ctx context.Context, endpoint string) (*OTLP, error) {
	exp, err := newTraceExporter(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	o := &OTLP{spans: make(chan []sdktrace.ReadOnlySpan, otlpQueue), done: make(chan struct{}), export: exp.ExportSpans}
	go o.run(exp)
	return o, nil
}

func newTraceExporter(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("sidecar: --otlp-endpoint %s: %w", endpoint, err)
	}
	return exp, nil
}

// Sink is the telemetry.Options.Sinks entry of o.
func (o *OTLP) Sink(r *Record) {
	spans := Spans(r)
	if len(spans) == 0 {
		return
	}
	select {
	case o.spans <- spans:
	default:
	}
}

// Close exports what is queued and stops.
func (o *OTLP) Close(ctx context.Context) error {
	close(o.spans)
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run batches the queued spans: one export per otlpBatch spans or otlpEvery.
func (o *OTLP) run(exp sdktrace.SpanExporter) {
	defer close(o.done)
	defer func() { _ = exp.Shutdown(context.Background()) }()
	tick := time.NewTicker(otlpEvery)
	defer tick.Stop()
	var batch []sdktrace.ReadOnlySpan
	flush := func() {
		if len(batch) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = o.export(ctx, batch) // an unreachable collector loses the batch
			cancel()
			batch = nil
		}
	}
	for {
		select {
		case s, ok := <-o.spans:
			if !ok {
				flush()
				return
			}
			if batch = append(batch, s...); len(batch) >= otlpBatch {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

var scope = instrumentation.Scope{Name: "github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"}

// Spans are r's invocation span and the spans it opened; none without workerd's trace
// and span ids.
func Spans(r *Record) []sdktrace.ReadOnlySpan {
	tid, err1 := trace.TraceIDFromHex(r.TraceID)
	sid, err2 := trace.SpanIDFromHex(r.SpanID)
	if err1 != nil || err2 != nil {
		return nil
	}
	res := resource.NewSchemaless(semconv.ServiceName(r.Worker))
	ctx := func(id trace.SpanID) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: id, TraceFlags: trace.FlagsSampled})
	}
	start := msTime(r.Start)
	end := msTime(r.Start + r.WallMs)
	name := r.Trigger
	if r.Method != "" {
		name += " " + r.Method
	}
	inv := tracetest.SpanStub{
		Name: name, SpanContext: ctx(sid), SpanKind: trace.SpanKindServer, StartTime: start, EndTime: end,
		Resource: res, InstrumentationScope: scope, Status: status(r.Outcome),
		Attributes: invocationAttributes(r),
	}
	if p, err := parentSpanID(r.ParentSpanID); err == nil {
		inv.Parent = ctx(p)
	}
	out := []sdktrace.ReadOnlySpan{inv.Snapshot()}
	for _, s := range r.Spans {
		id, err := trace.SpanIDFromHex(s.SpanID)
		parent, perr := trace.SpanIDFromHex(s.Parent)
		if err != nil || perr != nil {
			continue
		}
		e := end
		if s.End > 0 {
			e = msTime(s.End)
		}
		out = append(out, tracetest.SpanStub{
			Name: s.Name, SpanContext: ctx(id), Parent: ctx(parent), SpanKind: trace.SpanKindClient,
			StartTime: msTime(s.Start), EndTime: e, Resource: res, InstrumentationScope: scope, Status: status(s.Outcome),
		}.Snapshot())
	}
	return out
}

func parentSpanID(s string) (trace.SpanID, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return trace.SpanID{}, fmt.Errorf("no parent")
	}
	return trace.SpanIDFromHex(s)
}

func invocationAttributes(r *Record) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String("workerd.worker", r.Worker),
		attribute.String("workerd.entrypoint", r.Entrypoint),
		attribute.String("workerd.handler", r.Trigger),
		attribute.String("workerd.outcome", r.Outcome),
		attribute.String("workerd.invocation_id", r.InvocationID),
	}
	if r.Method != "" {
		a = append(a, attribute.String("rpc.method", r.Method))
	}
	if r.Status > 0 {
		a = append(a, semconv.HTTPResponseStatusCode(r.Status))
	}
	return a
}

// status: an error unless the outcome is ok (or unknown, for a span workerd did not close).
func status(outcome string) sdktrace.Status {
	if outcome == "" || outcome == "ok" {
		return sdktrace.Status{Code: codes.Unset}
	}
	return sdktrace.Status{Code: codes.Error, Description: outcome}
}

func msTime(ms float64) time.Time { return time.UnixMilli(int64(ms)) }
