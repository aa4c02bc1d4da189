package ai

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// usage is token usage, the same in both shapes.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// openAIToolCall is one tool call of an OpenAI chat answer.
type openAIToolCall struct {
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAIAnswer is a chat or completion answer, streamed or not.
type openAIAnswer struct {
	Choices []struct {
		Text    string `json:"text"`
		Message *struct {
			Content   string           `json:"content"`
			ToolCalls []openAIToolCall `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	// Error is an error event in a stream (vLLM, OpenAI: data: {"error": ...}).
	Error json.RawMessage `json:"error"`
}

// decodeAnswer decodes the server's whole answer into v, refusing one over
// maxAnswerBytes rather than holding it in the sidecar's memory.
func decodeAnswer(body io.Reader, v any) error {
	lr := &io.LimitedReader{R: body, N: maxAnswerBytes + 1}
	err := json.NewDecoder(lr).Decode(v)
	if lr.N <= 0 {
		return fmt.Errorf("the inference server's answer: over %d bytes", maxAnswerBytes)
	}
	if err != nil {
		return fmt.Errorf("the inference server's answer: %v", err)
	}
	return nil
}

// generation is Cloudflare's text-generation answer
// (https://developers.cloudflare.com/workers-ai/models/, text-generation output).
type generation struct {
	Response  string     `json:"response"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	Usage     *usage     `json:"usage,omitempty"`
}

// toolCall is Cloudflare's tool call: the arguments as an object.
type toolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// translateGeneration answers a chat or completion as {response, tool_calls, usage}.
func translateGeneration(w http.ResponseWriter, body io.Reader, t task) {
	var a openAIAnswer
	if err := decodeAnswer(body, &a); err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	if len(a.Choices) == 0 {
		writeError(w, http.StatusBadGateway, errNoChoice)
		return
	}
	c := a.Choices[0]
	out := generation{Response: c.Text, Usage: a.Usage}
	if t == taskChat && c.Message != nil {
		out.Response = c.Message.Content
		for _, tc := range c.Message.ToolCalls {
			args := json.RawMessage(tc.Function.Arguments)
			if !json.Valid(args) {
				args, _ = json.Marshal(tc.Function.Arguments)
			}
			out.ToolCalls = append(out.ToolCalls, toolCall{Name: tc.Function.Name, Arguments: args})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// embeddings is Cloudflare's text-embeddings answer: the vectors and their shape
// (https://developers.cloudflare.com/workers-ai/models/bge-base-en-v1.5/).
type embeddings struct {
	Shape   [2]int      `json:"shape"`
	Data    [][]float64 `json:"data"`
	Pooling string      `json:"pooling"`
}

// translateEmbeddings answers OpenAI's {data: [{embedding, index}]} as {shape, data}.
func translateEmbeddings(w http.ResponseWriter, body io.Reader, texts int) {
	var a struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := decodeAnswer(body, &a); err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	// One vector per text, each at its own index, all of one width: anything else is
	// not passed on as {shape, data}.
	bad := func(format string, args ...any) {
		writeError(w, http.StatusBadGateway, fmt.Errorf("the inference server's embeddings: "+format, args...))
	}
	if len(a.Data) != texts {
		bad("%d vectors for %d texts", len(a.Data), texts)
		return
	}
	out := embeddings{Data: make([][]float64, len(a.Data)), Pooling: "mean"}
	for _, d := range a.Data {
		if d.Index < 0 || d.Index >= len(a.Data) || out.Data[d.Index] != nil {
			bad("index %d out of range or repeated", d.Index)
			return
		}
		out.Data[d.Index] = d.Embedding
	}
	out.Shape[0] = len(out.Data)
	if len(out.Data) > 0 {
		out.Shape[1] = len(out.Data[0])
	}
	for i, v := range out.Data {
		if len(v) == 0 || len(v) != out.Shape[1] {
			bad("vector %d has %d dimensions, vector 0 has %d", i, len(v), out.Shape[1])
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// translateStream turns the server's chat or completion event stream into
// Cloudflare's: `data: {"response": "<text>"}` per piece, one event with the usage
// when the server sent it, then `data: [DONE]`
// (https://developers.cloudflare.com/workers-ai/features/streaming/).
func translateStream(w http.ResponseWriter, body io.Reader) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	var last *usage
	done := false
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event:") && strings.Contains(line, "error") || strings.HasPrefix(line, "error:") {
			panic(http.ErrAbortHandler) // llama-server's error event: the answer failed
		}
		data, ok := strings.CutPrefix(line, "data:")
		data = strings.TrimSpace(data)
		if !ok || data == "" {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var a openAIAnswer
		if json.Unmarshal([]byte(data), &a) != nil || a.Error != nil {
			// An event that is not an answer's piece, or the server's error: the answer
			// is not what the server meant to send.
			panic(http.ErrAbortHandler)
		}
		if a.Usage != nil {
			last = a.Usage
		}
		if text := pieceOf(a); text != "" {
			writeEvent(w, generation{Response: text})
			flush()
		}
	}
	if !done {
		// The server's stream broke, or ended without its [DONE] (a cut answer): end the
		// Worker's stream with an error, not [DONE].
		panic(http.ErrAbortHandler)
	}
	if last != nil {
		writeEvent(w, generation{Usage: last})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}

// pieceOf is the text a streamed chunk adds.
func pieceOf(a openAIAnswer) string {
	if len(a.Choices) == 0 {
		return ""
	}
	if c := a.Choices[0]; c.Delta != nil {
		return c.Delta.Content
	}
	return a.Choices[0].Text
}

func writeEvent(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
}
