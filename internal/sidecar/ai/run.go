package ai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	neturl "net/url"
	"sort"
	"strings"
)

// modelHeader carries run()'s model name (ai-api.ts).
const modelHeader = "cf-consn-model-id"

// defaultMaxTokens is Cloudflare's default max_tokens of its text-generation models
// (https://developers.cloudflare.com/workers-ai/models/, each model's parameters).
const defaultMaxTokens = 256

// runRequest is run()'s body: the inputs and the options left after the binding
// removed its own (prefix, extraHeaders, signal).
type runRequest struct {
	Inputs  map[string]json.RawMessage `json:"inputs"`
	Options map[string]json.RawMessage `json:"options"`
}

// task is what a run() asks for, read from its inputs as Cloudflare's task schemas
// tell them apart.
type task int

const (
	taskChat       task = iota // messages, or prompt through the model's chat template
	taskCompletion             // prompt with raw: true
	taskEmbeddings             // text: a string or a list of strings
)

// generationParams are the text-generation inputs passed on to the server under the
// same names (https://developers.cloudflare.com/workers-ai/models/ text-generation schema).
var generationParams = []string{"max_tokens", "temperature", "top_p", "top_k", "seed",
	"frequency_penalty", "presence_penalty", "repetition_penalty", "tools", "response_format"}

// run answers one run(): it reads the inputs, calls the server and translates the answer.
func (g *Gateway) run(w http.ResponseWriter, r *http.Request, b *binding) {
	if b.configErr != nil {
		writeError(w, http.StatusInternalServerError, b.configErr)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusNotImplemented, fmt.Errorf("inputs given as a ReadableStream (%s) are not supported here: pass JSON inputs (%s)", ct, Doc))
		return
	}
	var req runRequest
	// Read to the end: the sidecar lifts a request's body deadline only then, and a
	// stream outlives it.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("the request body: %v (at most %d bytes of JSON)", err, maxRequestBytes))
		return
	}
	model, key, err := b.resolve(r.Header.Get(modelHeader))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	t, body, texts, err := upstreamBody(req.Inputs, model.Model)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	stream := t != taskEmbeddings && isTrue(req.Inputs["stream"])
	res, err := g.post(r, key, model.URL+upstreamPath(t), body)
	if err != nil {
		g.logf("ai: binding %s: %v", b.name, err)
		writeError(w, http.StatusBadGateway, err)
		return
	}
	defer res.Body.Close()
	if stream && !isEventStream(res) {
		writeError(w, http.StatusBadGateway, fmt.Errorf("the inference server answered %s to a stream request, not text/event-stream", res.Header.Get("Content-Type")))
		return
	}
	if res.StatusCode/100 != 2 {
		status := res.StatusCode
		if status < 400 { // a redirect or other non-answer is the server's failure
			status = http.StatusBadGateway
		}
		writeError(w, status, upstreamError(res))
		return
	}
	switch {
	case stream:
		translateStream(w, res.Body)
	case t == taskEmbeddings:
		translateEmbeddings(w, res.Body, texts)
	default:
		translateGeneration(w, res.Body, t)
	}
}

// upstreamBody is the OpenAI request for inputs, its task and, for embeddings, the
// number of texts.
func upstreamBody(in map[string]json.RawMessage, model string) (task, []byte, int, error) {
	out := map[string]any{"model": model}
	var t task
	switch {
	case in["messages"] != nil:
		if err := checkMedia(in["messages"]); err != nil {
			return 0, nil, 0, err
		}
		out["messages"] = in["messages"]
	case in["prompt"] != nil && isTrue(in["raw"]):
		var prompt string
		if err := json.Unmarshal(in["prompt"], &prompt); err != nil {
			return 0, nil, 0, fmt.Errorf("inputs.prompt: want a string")
		}
		t, out["prompt"] = taskCompletion, prompt
	case in["prompt"] != nil:
		var prompt string
		if err := json.Unmarshal(in["prompt"], &prompt); err != nil {
			return 0, nil, 0, fmt.Errorf("inputs.prompt: want a string")
		}
		out["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	case in["text"] != nil:
		var texts []string
		if err := json.Unmarshal(in["text"], &texts); err != nil {
			var one string
			if json.Unmarshal(in["text"], &one) != nil {
				return 0, nil, 0, fmt.Errorf("inputs.text: want a string or a list of strings")
			}
			texts = []string{one}
		}
		if len(texts) > maxTexts {
			return 0, nil, 0, fmt.Errorf("inputs.text: %d texts, at most %d in one call", len(texts), maxTexts)
		}
		b, err := json.Marshal(map[string]any{"model": model, "input": texts})
		return taskEmbeddings, b, len(texts), err
	default:
		return 0, nil, 0, fmt.Errorf("inputs: want messages or prompt (text generation) or text (embeddings); other tasks are not supported here (%s)", Doc)
	}
	out["max_tokens"] = defaultMaxTokens
	for _, p := range generationParams {
		if v, ok := in[p]; ok {
			out[p] = v
		}
	}
	if isTrue(in["stream"]) && in["tools"] != nil {
		return 0, nil, 0, fmt.Errorf("inputs.tools with stream: true: streamed tool calls are not supported here; call without stream (%s)", Doc)
	}
	if isTrue(in["stream"]) {
		out["stream"] = true
		out["stream_options"] = map[string]bool{"include_usage": true}
	}
	b, err := json.Marshal(out)
	return t, b, 0, err
}

func upstreamPath(t task) string {
	return map[task]string{taskChat: "/chat/completions", taskCompletion: "/completions", taskEmbeddings: "/embeddings"}[t]
}

// post sends body to url with key, canceled with the Worker's request.
func (g *Gateway) post(r *http.Request, key, url string, body []byte) (*http.Response, error) {
	// The url is the Secret's: errors name neither it nor its parse error (which quotes it,
	// password included), only the cause. The body is let go once sent: a stream holds
	// the request (res.Request) as long as it lasts.
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, &releasingReader{b: body})
	if err != nil {
		return nil, errors.New("the inference server's url is not a valid URL (the binding's Secret or model entry)")
	}
	req.ContentLength, req.GetBody = int64(len(body)), nil
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := g.client.Do(req)
	if err != nil {
		g.logf("ai: inference server %s: %v", redact(req.URL), err)
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("inference server: %w", err)
	}
	return res, nil
}

// upstreamError is the server's own error message (OpenAI's {"error": {"message"}}).
func upstreamError(res *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && e.Error != nil {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
			msg = inner.Message
		} else if json.Unmarshal(e.Error, &msg) != nil {
			msg = string(e.Error)
		}
	}
	return fmt.Errorf("inference server answered %s: %s", res.Status, msg)
}

// writeError answers Cloudflare's error shape, which the binding reads as
// InferenceUpstreamError("<code>: <message>"); the code is the HTTP status.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]any{"success": false, "errors": []map[string]any{{"code": status, "message": err.Error()}}})
}

// writeJSON answers v. The binding parses a body as JSON only when its Content-Type is
// exactly application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// releasingReader is a request body that drops its bytes as they are sent.
type releasingReader struct{ b []byte }

func (r *releasingReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// redact is u for the sidecar's log: no password, no path (tokens are put there too).
func redact(u *neturl.URL) string { return u.Scheme + "://" + u.Host }

// isEventStream: the server answers a stream request with an event stream (an error
// status with its JSON error is read as such).
func isEventStream(res *http.Response) bool {
	if res.StatusCode/100 != 2 {
		return true
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

// checkMedia refuses content parts that name remote media: OpenAI-compatible servers
// (vLLM, llama-server) fetch an image_url, input_audio or video_url themselves, from
// their own network, past the Worker's outbound rules. data: URLs (Cloudflare's vision
// models take base64 images) pass.
func checkMedia(messages json.RawMessage) error {
	var ms []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(messages, &ms) != nil {
		return nil // not a list: the server refuses it, naming why
	}
	for i, m := range ms {
		var parts []map[string]json.RawMessage
		if json.Unmarshal(m.Content, &parts) != nil {
			continue // a string (or what the server refuses)
		}
		for j, p := range parts {
			for k, v := range p {
				if k == "type" || k == "text" {
					continue
				}
				var media struct {
					URL string `json:"url"`
				}
				if json.Unmarshal(v, &media) != nil || !strings.HasPrefix(media.URL, "data:") {
					return fmt.Errorf("inputs.messages[%d].content[%d].%s: only text and data: URLs are supported here (the server would fetch a URL itself, past the Worker's outbound rules)", i, j, k)
				}
			}
		}
	}
	return nil
}

func isTrue(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("true")) }

func sortedNames(m map[string]Model) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var errNoChoice = errors.New("the inference server's answer has no choices")
