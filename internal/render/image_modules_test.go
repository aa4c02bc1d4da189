package render_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestImageModulesRun: every module spec.source.image.modules lists is loaded by
// workerd from the image directory (here a plain directory where the pod mounts the
// image), with its type: an ES module imported by path, a Text, a JSON and a Data module.
func TestImageModulesRun(t *testing.T) {
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "default"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2026-11-01",
		Source: v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "localhost:5000/b:1", Path: "/bundle", Main: "index.js",
			Modules: []v1alpha1.ImageModule{
				{Name: "index.js", Type: v1alpha1.ModuleESModule},
				{Name: "chunks/greet.js", Type: v1alpha1.ModuleESModule},
				{Name: "words.txt", Type: v1alpha1.ModuleText},
				{Name: "conf.json", Type: v1alpha1.ModuleJSON},
				{Name: "blob.bin", Type: v1alpha1.ModuleData},
			}}},
	}}
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files, out.External); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"index.js": `import { greet } from "./chunks/greet.js";
import words from "./words.txt"; import conf from "./conf.json"; import blob from "./blob.bin";
export default { fetch() { return new Response(greet(words) + " " + conf.n + " " + blob.byteLength); } };`,
		"chunks/greet.js": `export function greet(w) { return "hello " + w.trim(); }`,
		"words.txt":       "image\n",
		"conf.json":       `{"n": 42}`,
		"blob.bin":        "\x00\x01\x02",
	}
	for name, data := range files {
		p := filepath.Join(dir, podcontract.ModulesSubdir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	res, err := http.Get("http://" + l.Addrs[podcontract.HTTPSocket] + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := "hello image 42 3"; string(body) != want {
		t.Errorf("body %q, want %q\nworkerd output:\n%s", body, want, l.Output())
	}
}
