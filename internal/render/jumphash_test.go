package render_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/shim"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

type jumpVector struct {
	ID     string `json:"id"`
	Shards int32  `json:"shards"`
	Shard  int32  `json:"shard"`
}

func loadJumpVectors(t *testing.T) ([]byte, []jumpVector) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "do", "jumphash-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []jumpVector }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return raw, f.Vectors
}

func TestShardForVectors(t *testing.T) {
	_, vs := loadJumpVectors(t)
	for _, v := range vs {
		got, err := render.ShardFor(v.ID, v.Shards)
		if err != nil {
			t.Fatal(err)
		}
		if got != v.Shard {
			t.Errorf("ShardFor(%q, %d) = %d, want %d", v.ID, v.Shards, got, v.Shard)
		}
	}
}

func TestShardForLimits(t *testing.T) {
	for _, n := range []int32{0, -1, render.MaxShards + 1} {
		_, err := render.ShardFor("x", n)
		if err == nil || !strings.Contains(err.Error(), "spec.shards") || !strings.Contains(err.Error(), "1 to 64") {
			t.Errorf("ShardFor(x, %d): %v, want an error naming spec.shards and 1 to 64", n, err)
		}
	}
}

// TestShardForVectorsJS runs internal/shim/router-common.js in the pinned workerd on
// the same vectors.
func TestShardForVectorsJS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts workerd")
	}
	raw, vs := loadJumpVectors(t)
	dir := t.TempDir()
	main := `import { shardFor } from "./router-common.js";
export default { async fetch(req) {
  const { vectors } = await req.json();
  return Response.json(vectors.map((v) => shardFor(v.id, v.shards)));
} };`
	config := `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "sidecar", external = (http = ())), (name = "main", worker = (modules = [(name = "main.js", esModule = embed "main.js"), (name = "router-common.js", esModule = embed "router-common.js")], compatibilityDate = "2025-01-01"))],
  sockets = [(name = "http", http = (), service = "main")],
);
`
	if err := localrun.WriteFiles(dir, []render.File{
		{Path: podcontract.ConfigFile, Data: []byte(config)},
		{Path: "main.js", Data: []byte(main)},
		{Path: "router-common.js", Data: shim.MustSource("router-common.js")},
	}); err != nil {
		t.Fatal(err)
	}
	l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir, Sockets: []string{podcontract.HTTPSocket}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	resp, err := http.Post("http://"+l.Addrs[podcontract.HTTPSocket]+"/", "application/json", strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got []int32
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if len(got) != len(vs) {
		t.Fatalf("%d answers for %d vectors", len(got), len(vs))
	}
	for i, v := range vs {
		if got[i] != v.Shard {
			t.Errorf("JS shardFor(%q, %d) = %d, want %d", v.ID, v.Shards, got[i], v.Shard)
		}
	}
}
