package ai

// The inference server's faults and a hostile Worker's inputs, which no real server
// produces on demand: net/http/httptest servers answer as a failing or misbehaving
// OpenAI-compatible server would (the real server's answers: ai_test.go).

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// callGateway runs one run() through a gateway whose Secret names url (key sk-secret,
// "*" -> m) and answers the recorder. ServeHTTP's panic(http.ErrAbortHandler) (a
// stream broken off) is reported as aborted.
func callGateway(t *testing.T, url, inputs string) (rec *httptest.ResponseRecorder, aborted bool) {
	t.Helper()
	g := New([]BindingConfig{{Name: "AI", URL: url, APIKey: "sk-secret", SecretModels: `{"*": "m"}`}}, Options{})
	req := httptest.NewRequest(http.MethodPost, "/run?version=3", strings.NewReader(`{"inputs": `+inputs+`, "options": {}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(podcontract.AIBindingHeader, "AI")
	req.Header.Set(modelHeader, "@cf/x")
	rec = httptest.NewRecorder()
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				aborted = true
			}
		}()
		g.ServeHTTP(rec, req)
	}()
	return rec, aborted
}

func upstream(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL + "/v1"
}

func sse(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, l := range lines {
		fmt.Fprint(w, l+"\n\n")
	}
}

const piece = `data: {"choices":[{"delta":{"content":"Hel"}}]}`

// a stream the server fails must not end with [DONE] (docs/ai.md: "a cut answer is
// never passed off as complete").
func TestStreamFailuresAreNotDone(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		// vLLM / OpenAI: an error event in the stream, then [DONE].
		"error data event": func(w http.ResponseWriter, _ *http.Request) {
			sse(w, piece, `data: {"error": {"message": "CUDA out of memory", "code": 500}}`, "data: [DONE]")
		},
		// llama.cpp's llama-server: an `error:` event, then the stream ends.
		"error event": func(w http.ResponseWriter, _ *http.Request) {
			sse(w, piece, `error: {"code": 500, "message": "context shift is disabled", "type": "server_error"}`)
		},
		// A server that stops cleanly (e.g. a proxy with Content-Length or a worker
		// restart behind a load balancer) without its [DONE].
		"no [DONE]": func(w http.ResponseWriter, _ *http.Request) {
			sse(w, piece)
		},
		// A server that ignores stream:true and answers JSON (e.g. a proxy that strips it).
		"not an event stream": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"message":{"content":"Hello world"}}]}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec, aborted := callGateway(t, upstream(t, h), `{"prompt": "hi", "stream": true}`)
			if !aborted && strings.Contains(rec.Body.String(), "data: [DONE]") {
				t.Errorf("a failed stream was passed off as complete:\n%s", rec.Body.String())
			}
		})
	}
}

// the server's error messages must not hand the Worker the Secret's url (the
// Worker's author may not read the Secret; an unreachable or refused server is enough).
func TestErrorsDoNotNameTheSecretsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: connection refused
	url := "http://svc-user:hunter2@" + addr + "/tenant/TOKEN-abc123/v1"
	rec, _ := callGateway(t, url, `{"prompt": "hi"}`)
	if body := rec.Body.String(); strings.Contains(body, "TOKEN-abc123") || strings.Contains(body, "svc-user") {
		t.Errorf("the error names the Secret's url: %s", body)
	}
	// A Secret written with a trailing newline (kubectl create secret --from-file, echo):
	// the url's parse error quotes it whole, password included.
	rec, _ = callGateway(t, url+"\n", `{"prompt": "hi"}`)
	if body := rec.Body.String(); strings.Contains(body, "hunter2") || strings.Contains(body, "TOKEN-abc123") {
		t.Errorf("the error names the Secret's url with its password: %s", body)
	}
}

// the server's answer is read into memory without a bound: a Worker's own model
// entry (any url its outbound rules allow) or a huge embeddings batch makes the sidecar
// (256 MiB) hold it all, several times over.
func TestAnswerSizeIsBounded(t *testing.T) {
	const size = 40 << 20
	url := upstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"`)
		chunk := strings.Repeat("a", 1<<20)
		for i := 0; i < size>>20; i++ {
			io.WriteString(w, chunk)
		}
		io.WriteString(w, `"}}]}`)
	})
	rec, _ := callGateway(t, url, `{"prompt": "hi"}`)
	if rec.Code == http.StatusOK {
		t.Errorf("a %d MiB answer was read whole and passed on (%d bytes)", size>>20, rec.Body.Len())
	}
}

// the number of texts of one embeddings call is not bounded (Cloudflare's bge
// models take at most 100); 10 MiB of one-letter texts is ~2.5 million vectors.
func TestEmbeddingsBatchIsBounded(t *testing.T) {
	called := false
	url := upstream(t, func(w http.ResponseWriter, _ *http.Request) { called = true })
	texts := `["` + strings.TrimSuffix(strings.Repeat(`a","`, 5000), `","`) + `"]`
	rec, _ := callGateway(t, url, `{"text": `+texts+`}`)
	if called || rec.Code != http.StatusBadRequest {
		t.Errorf("5000 texts went to the server (status %d)", rec.Code)
	}
}

// an embeddings answer with fewer vectors than texts, or with duplicate indices,
// is passed on as complete: `data` holds null, `shape` lies.
func TestEmbeddingsAnswerIsChecked(t *testing.T) {
	for name, answer := range map[string]string{
		"missing vector":    `{"data":[{"index":0,"embedding":[1,2]}]}`,
		"duplicate index":   `{"data":[{"index":1,"embedding":[1,2]},{"index":1,"embedding":[3,4]}]}`,
		"inconsistent size": `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[3]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			url := upstream(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, answer)
			})
			rec, _ := callGateway(t, url, `{"text": ["a", "b"]}`)
			if rec.Code == http.StatusOK {
				t.Errorf("a bad embeddings answer was passed on: %s", rec.Body.String())
			}
		})
	}
}

// SSRF through the inference server: content parts naming remote media are passed
// to the server verbatim; vLLM (and llama-server with remote media) fetch them from the
// server's network, past the Worker's outbound rules.
func TestRemoteMediaURLsAreRefused(t *testing.T) {
	var got string
	url := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	})
	rec, _ := callGateway(t, url, `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data/"}}]}]}`)
	if strings.Contains(got, "169.254.169.254") {
		t.Errorf("a remote media url reached the server (status %d): %s", rec.Code, got)
	}
}

// TestRefusedInputs: inputs the gateway cannot answer faithfully are refused before the
// server is called, naming the field: a raw prompt that is not one string (several
// prompts would get several answers, of which Cloudflare's shape holds one) and tools
// with stream (a streamed tool call has no {"response"} piece).
func TestRefusedInputs(t *testing.T) {
	called := false
	url := upstream(t, func(w http.ResponseWriter, _ *http.Request) { called = true })
	for inputs, want := range map[string]string{
		`{"prompt": ["a", "b"], "raw": true}`:                                            "inputs.prompt: want a string",
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [], "stream": true}`: "inputs.tools with stream: true",
	} {
		rec, _ := callGateway(t, url, inputs)
		if called || rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: status %d %s (server called: %v), want 400 naming %q", inputs, rec.Code, rec.Body.String(), called, want)
		}
	}
}
