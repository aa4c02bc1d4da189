package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// TinyLlamaAlias is the model id llama-server reports for the tiny model.
const TinyLlamaAlias = "tiny-llama"

// LlamaOptions chooses what a llama-server serves: llama-server serves either chat and
// completions or, with Embeddings, embeddings.
type LlamaOptions struct {
	Embeddings bool
	// Host is the address it listens on; "" is 127.0.0.1 (any loopback address works on
	// Linux; the e2e suite's pods reach an address of their Pod CIDR stand-in).
	Host string
}

// LlamaServer is a real OpenAI-compatible inference server (llama.cpp's llama-server)
// a test started with the tiny generated model (StartLlamaServer).
type LlamaServer struct {
	URL   string // base URL ending in /v1
	Model string // the model id the server reports at /v1/models
}

// StartLlamaServer starts llama-server (hack/install-llama.sh) on o.Host and a free
// port with DefaultTinyLlama, waits until it is healthy, and kills it when t ends.
// Without the binary, and not root to build it, the test is skipped.
func StartLlamaServer(t testing.TB, o LlamaOptions) *LlamaServer {
	t.Helper()
	bin, err := toolchain.LlamaServerBin()
	if err != nil {
		t.Fatal(err)
	}
	if bin == "" {
		t.Skip("llama-server is not built and this is not root to install cmake (run make tools as root, or apt-get install cmake g++ and run hack/install-llama.sh)")
	}
	model, err := TinyLlamaModel(filepath.Dir(filepath.Dir(bin)), toolchain.LlamaVocab(bin), DefaultTinyLlama)
	if err != nil {
		t.Fatalf("tiny model: %v", err)
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := freePort(t, host)
	// Two threads and slots: the CI machine has two cores; each slot has the model's
	// whole context (2048 tokens), room for a template's max_tokens of 1024.
	args := []string{"-m", model, "--host", host, "--port", port, "--alias", TinyLlamaAlias,
		"-t", "2", "-np", "2", "-c", "4096", "--no-webui", "--no-warmup"}
	if o.Embeddings {
		args = append(args, "--embeddings", "--pooling", "mean")
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log := &localrun.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	base := "http://" + net.JoinHostPort(host, port)
	waitLlama(t, base, exited, log)
	return &LlamaServer{URL: base + "/v1", Model: llamaModelID(t, base)}
}

// waitLlama waits until GET /health answers 200 (the model is loaded), at most a minute.
func waitLlama(t testing.TB, base string, exited <-chan struct{}, log fmt.Stringer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		select {
		case <-exited:
			t.Fatalf("llama-server exited:\n%s", log.String())
		default:
		}
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("llama-server did not become healthy:\n%s", log.String())
}

// llamaModelID is the first model id of GET /v1/models.
func llamaModelID(t testing.TB, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) == 0 {
		t.Fatalf("GET /v1/models: %s, %v, %+v", resp.Status, err, models)
	}
	return models.Data[0].ID
}
