package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// llmChatTemplate is Cloudflare's Workers AI chat template, kept unchanged in this
// repository's test data (../shared has no AI project; test/testdata/cloudflare-templates).
const llmChatTemplate = "llm-chat-app-template"

// TestLLMChatTemplate is Done means 1 (Workers AI) of issue 39: the template, deployed
// unchanged by `deploy`, streams its chat answers from a real llama.cpp server through
// its ai binding (the namespace's Secret workers-ai maps every model to the server's),
// and Cloudflare's own Playwright spec for it passes. The model is tiny and untrained
// (docs/ai.md), so the spec's checks, which need no particular wording, are the measure.
func TestLLMChatTemplate(t *testing.T) {
	// Not 127.0.0.1: the local cluster gives each pod its own stand-in for it.
	host, _, _ := net.SplitHostPort(podCIDRAddr(t, 21))
	llm := testenv.StartLlamaServer(t, testenv.LlamaOptions{Host: host})
	models, _ := json.Marshal(map[string]string{"*": llm.Model})
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: wrangler.AISecret},
		StringData: map[string]string{"url": llm.URL, "models": string(models)}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, secret) })
	src := filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", llmChatTemplate)
	dir, err := testenv.CopyProject(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := deployDir(t, dir)
	checkChatStream(t, d.url+"/api/chat")
	runSpecFile(t, llmChatTemplate, filepath.Join(src, "..", "playwright-tests", llmChatTemplate+".spec.ts"), d.url)
}

// checkChatStream posts a chat as the template's page does and reads Cloudflare's
// event stream back: {"response"} pieces, then [DONE]
// (https://developers.cloudflare.com/workers-ai/features/streaming/).
func checkChatStream(t *testing.T, url string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"Hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		podLogs(t, llmChatTemplate)
		t.Fatalf("POST /api/chat: %s %s", res.Status, res.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if len(events) < 2 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q: want {response} pieces, then [DONE]", events)
	}
	var piece struct{ Response *string }
	if err := json.Unmarshal([]byte(events[0]), &piece); err != nil || piece.Response == nil {
		t.Errorf("first event %s: not {\"response\": ...} (%v)", events[0], err)
	}
}
