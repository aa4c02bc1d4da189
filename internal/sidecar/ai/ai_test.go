package ai_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/ai"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// aiWorker runs env.AI.run(model, inputs, options) for the JSON body {model, inputs,
// options} and answers the result (a stream as it comes), or the error's name and
// message with status 500.
const aiWorker = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      if (url.pathname === "/models") return Response.json(await env.AI.models());
      const { model, inputs, options } = await request.json();
      const out = await env.AI.run(model, inputs, options ?? undefined);
      if (out instanceof ReadableStream) return new Response(out, { headers: { "content-type": "text/event-stream" } });
      return Response.json(out);
    } catch (e) {
      return Response.json({ name: e.name, message: e.message }, { status: 500 });
    }
  },
};`

// Cloudflare model names the Worker uses, mapped to the test server's models.
const (
	chatModel      = "@cf/meta/llama-3.1-8b-instruct"
	embeddingModel = "@cf/baai/bge-base-en-v1.5"
)

type harness struct {
	t    *testing.T
	base string
	chat *testenv.LlamaServer
	emb  *testenv.LlamaServer
}

// newHarness starts two real llama.cpp servers (chat, embeddings) on the tiny model,
// the sidecar with the AI gateway and workerd with the rendered Worker binding AI.
func newHarness(t *testing.T, rules *outbound.Rules) *harness {
	return newHarnessWith(t, sidecartest.Sidecar{Outbound: rules})
}

// newHarnessWith is newHarness with the sidecar's other settings in sc.
func newHarnessWith(t *testing.T, sc sidecartest.Sidecar) *harness {
	t.Helper()
	h := &harness{t: t, chat: testenv.StartLlamaServer(t, testenv.LlamaOptions{}),
		emb: testenv.StartLlamaServer(t, testenv.LlamaOptions{Embeddings: true})}
	models, _ := json.Marshal(map[string]any{chatModel: h.chat.Model})
	cfg := ai.BindingConfig{Name: "AI", URL: h.chat.URL, SecretModels: string(models),
		Models: []ai.Model{{Name: embeddingModel, Model: h.emb.Model, URL: h.emb.URL}}}
	sc.AI = []ai.BindingConfig{cfg}
	addr := sidecartest.StartSidecar(t, sc)
	w := sidecartest.InlineWorker("ai", aiWorker, v1alpha1.Binding{Name: "AI",
		AI: &v1alpha1.AIBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "workers-ai"}}})
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	h.base = sidecartest.StartWorker(t, addr, w, out)
	return h
}

// run posts {model, inputs, options} to the Worker and answers the status and body.
func (h *harness) run(model string, inputs map[string]any, options map[string]any) (int, string, http.Header) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "inputs": inputs, "options": options})
	res, err := http.Post(h.base+"/", "application/json", strings.NewReader(string(body)))
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw), res.Header
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

// generation is Cloudflare's text-generation output
// (https://developers.cloudflare.com/workers-ai/models/llama-3.1-8b-instruct/, Output).
type generation struct {
	Response *string `json:"response"`
	Usage    *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestTextGeneration(t *testing.T) {
	h := newHarness(t, nil)
	for name, inputs := range map[string]map[string]any{
		"messages": {"messages": []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}}},
		"prompt":   {"prompt": "Hello"},
		"raw":      {"prompt": "Once upon a time", "raw": true},
	} {
		t.Run(name, func(t *testing.T) {
			inputs["max_tokens"], inputs["temperature"] = 8, 0
			status, body, _ := h.run(chatModel, inputs, nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			g := decode[generation](t, body)
			if g.Response == nil || g.Usage == nil {
				t.Fatalf("not Cloudflare's shape {response, usage}: %s", body)
			}
			if u := g.Usage; u.CompletionTokens < 1 || u.CompletionTokens > 8 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v: max_tokens 8 not passed on, or totals wrong", *u)
			}
		})
	}
}

// TestStreamingMatchesTheAnswer: stream: true answers server-sent events of
// {"response"} pieces ending in [DONE]
// (https://developers.cloudflare.com/workers-ai/features/streaming/), whose text is
// the non-streamed answer's at temperature 0.
func TestStreamingMatchesTheAnswer(t *testing.T) {
	h := newHarness(t, nil)
	inputs := map[string]any{"prompt": "Tell me a story", "max_tokens": 12, "temperature": 0}
	_, body, _ := h.run(chatModel, inputs, nil)
	g := decode[generation](t, body)
	if g.Response == nil {
		t.Fatalf("no response: %s", body)
	}
	whole := *g.Response
	inputs["stream"] = true
	status, body, hdr := h.run(chatModel, inputs, nil)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", status, hdr.Get("Content-Type"), body)
	}
	var text strings.Builder
	var events []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if len(events) < 2 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q: want pieces, then [DONE]", events)
	}
	for _, e := range events[:len(events)-1] {
		g := decode[generation](t, e)
		if g.Response == nil {
			t.Fatalf("event %s has no response", e)
		}
		text.WriteString(*g.Response)
	}
	if text.String() != whole {
		t.Errorf("streamed text %q, answer %q", text.String(), whole)
	}
}

// TestStreamOutlivesTheBodyDeadline: the sidecar gives a request's body a deadline
// and lifts it once the body is read to its end; a stream lasting longer must not be cut.
func TestStreamOutlivesTheBodyDeadline(t *testing.T) {
	h := newHarnessWith(t, sidecartest.Sidecar{BodyTimeout: 50 * time.Millisecond})
	start := time.Now()
	status, body, _ := h.run(chatModel, map[string]any{"prompt": "Tell me a long story", "max_tokens": 1500, "temperature": 0, "stream": true}, nil)
	took := time.Since(start)
	if status != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("status %d after %s; the stream ends %q", status, took, body[max(0, len(body)-120):])
	}
	if took < 100*time.Millisecond {
		t.Logf("the stream took %s only: the deadline was not put to the test", took)
	}
}

// TestEmbeddings: {text} answers {shape, data} with one vector per text, of the
// model's width (https://developers.cloudflare.com/workers-ai/models/bge-base-en-v1.5/).
func TestEmbeddings(t *testing.T) {
	h := newHarness(t, nil)
	status, body, _ := h.run(embeddingModel, map[string]any{"text": []string{"the cat", "a dog"}}, nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	e := decode[struct {
		Shape   []int       `json:"shape"`
		Data    [][]float64 `json:"data"`
		Pooling string      `json:"pooling"`
	}](t, body)
	if len(e.Shape) != 2 || e.Shape[0] != 2 || e.Shape[1] != testenv.TinyLlamaEmbd || len(e.Data) != 2 || len(e.Data[1]) != e.Shape[1] {
		t.Fatalf("shape %v, %d vectors: %s", e.Shape, len(e.Data), body[:min(len(body), 200)])
	}
	if equal(e.Data[0], e.Data[1]) {
		t.Error("two different texts have the same vector")
	}
	_, one, _ := h.run(embeddingModel, map[string]any{"text": "the cat"}, nil)
	if v := decode[struct{ Data [][]float64 }](t, one).Data; len(v) != 1 || !equal(v[0], e.Data[0]) {
		t.Errorf("a single text's vector differs from the same text's in a list")
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestErrors: what cannot be answered throws InferenceUpstreamError naming the cause.
func TestErrors(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name, model string
		inputs      map[string]any
		want        string
	}{
		{"unmapped model", "@cf/unknown/model", map[string]any{"prompt": "hi"}, "400: no such model @cf/unknown/model"},
		{"no task", chatModel, map[string]any{"image": []int{1}}, "400: inputs: want messages or prompt"},
		{"bad text", embeddingModel, map[string]any{"text": 3}, "400: inputs.text: want a string or a list of strings"},
		{"server refuses", chatModel, map[string]any{"messages": "not a list"}, "inference server answered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := h.run(c.model, c.inputs, nil)
			e := decode[struct{ Name, Message string }](t, body)
			if status != 500 || e.Name != "InferenceUpstreamError" || !strings.Contains(e.Message, c.want) {
				t.Errorf("status %d %s: %q, want InferenceUpstreamError containing %q", status, e.Name, e.Message, c.want)
			}
		})
	}
	res, err := http.Get(h.base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var models []struct{ Name string }
	if err := json.NewDecoder(res.Body).Decode(&models); err != nil || len(models) != 2 || models[0].Name != embeddingModel || models[1].Name != chatModel {
		t.Errorf("models() = %+v, %v", models, err)
	}
}

// TestOutboundRulesApply: the gateway connects only where the Worker's outbound
// rules allow, as the Worker's own fetch() (docs/outbound.md).
func TestOutboundRulesApply(t *testing.T) {
	h := newHarness(t, &outbound.Rules{Allow: []string{outbound.Public}})
	status, body, _ := h.run(chatModel, map[string]any{"prompt": "hi", "max_tokens": 2}, nil)
	if e := decode[struct{ Message string }](t, body); status != 500 || !strings.Contains(e.Message, "is not allowed") {
		t.Errorf("status %d: %s, want the outbound refusal", status, body)
	}
}
