package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// aiTemplates are Cloudflare's Workers AI templates kept unchanged in this repository's
// test data (../shared has no AI project; test/testdata/cloudflare-templates), each with
// a check of its own beyond its Playwright spec.
var aiTemplates = []struct {
	name  string
	check func(t *testing.T, url string)
}{
	{"llm-chat-app-template", func(t *testing.T, url string) { checkChatStream(t, url+"/api/chat") }},
	{"commerce-llms-txt-template", checkLLMSTxt},
}

// TestAITemplates is Done means 1 (Workers AI) of issue 39: each template, deployed
// unchanged by `deploy`, reaches a real llama.cpp server through its ai binding (the
// namespace's Secret workers-ai maps every model to the server's), and Cloudflare's own
// Playwright spec for it passes. The model is tiny and untrained (docs/ai.md): the specs
// check no particular wording, and the checks here check Cloudflare's shapes.
func TestAITemplates(t *testing.T) {
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
	for _, tc := range aiTemplates {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", tc.name)
			dir, err := testenv.CopyProject(src, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			d := deployDir(t, dir)
			tc.check(t, d.url)
			runSpecFile(t, tc.name, filepath.Join(src, "..", "playwright-tests", tc.name+".spec.ts"), d.url)
		})
	}
}

// checkLLMSTxt reads /llms.txt, whose products the template enriches with env.AI.run
// (JSON inputs, a {response} answer it parses, falling back to its own rules when the
// answer holds no JSON), and checks that the AI calls were made and answered.
func checkLLMSTxt(t *testing.T, url string) {
	t.Helper()
	body, err := get(url + "/llms.txt")
	if err != nil || !strings.Contains(body, "Products In Stock") {
		t.Fatalf("/llms.txt: %v\n%.500s", err, body)
	}
	// The Worker's console lines reach the pod's log (workerd's, or the sidecar's JSON
	// log lines with invocation metrics on) within seconds, not at once.
	eventually(t, time.Minute, "the template's AI enrichment in its log", func() error {
		log := workerLogText(t, "commerce-llms-txt-template")
		// "Enrichment failed ... SyntaxError" is the template's JSON.parse of an answer
		// of the untrained model that holds braces; a failed call names its error.
		if strings.Contains(log, "InferenceUpstreamError") || strings.Contains(log, "AI call failed") {
			return fmt.Errorf("an AI call failed:\n%s", log)
		}
		if !strings.Contains(log, "AI enrichment complete") {
			return fmt.Errorf("no line says the AI enrichment completed")
		}
		return nil
	})
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
		podLogs(t, "llm-chat-app-template")
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

// workerLogText is every container's log of the Worker's pods.
func workerLogText(t *testing.T, worker string) string {
	var b strings.Builder
	for _, p := range workerPods(t, worker) {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			raw, _ := cluster.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(context.Background())
			b.Write(raw)
		}
	}
	return b.String()
}
