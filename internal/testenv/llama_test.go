package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postJSON(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s\n%s", url, resp.Status, msg)
	}
	return resp
}

// TestLlamaServerAnswers proves the real server answers the OpenAI API with the tiny
// model: a chat completion, the same streamed, and embeddings.
func TestLlamaServerAnswers(t *testing.T) {
	chat := StartLlamaServer(t, LlamaOptions{})
	if chat.Model != TinyLlamaAlias {
		t.Errorf("model id %q, want %q", chat.Model, TinyLlamaAlias)
	}
	req := map[string]any{"model": chat.Model, "messages": []map[string]string{{"role": "user", "content": "Hello"}}, "max_tokens": 8, "temperature": 0}
	var out struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(postJSON(t, chat.URL+"/chat/completions", req).Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content == nil || out.Usage.CompletionTokens < 1 || out.Usage.CompletionTokens > 8 {
		t.Fatalf("chat completion %+v", out)
	}
	t.Logf("chat: %q, %d tokens", *out.Choices[0].Message.Content, out.Usage.CompletionTokens)

	req["stream"] = true
	resp := postJSON(t, chat.URL+"/chat/completions", req)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream Content-Type %q", ct)
	}
	var data []string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream events %q", data)
	}

	emb := StartLlamaServer(t, LlamaOptions{Embeddings: true})
	var vecs struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	body := map[string]any{"model": emb.Model, "input": []string{"a", "b"}}
	if err := json.NewDecoder(postJSON(t, emb.URL+"/embeddings", body).Body).Decode(&vecs); err != nil {
		t.Fatal(err)
	}
	if len(vecs.Data) != 2 || len(vecs.Data[0].Embedding) != TinyLlamaEmbd || len(vecs.Data[1].Embedding) != TinyLlamaEmbd {
		t.Fatalf("embeddings %+v", vecs)
	}
}
