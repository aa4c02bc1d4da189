package wrangler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files outside the project never reach the YAML or the image: a test project tried a
// fake ~/.ssh key through symbolic links in its migrations and bundle directories and
// through an escaping or absolute assets.directory / migrations_dir.
func TestImportRefusesFilesOutsideTheProject(t *testing.T) {
	const secret = "-----BEGIN OPENSSH PRIVATE KEY----- not for publishing"
	home := t.TempDir()
	key := filepath.Join(home, "id_ed25519")
	if err := os.WriteFile(key, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	d1 := func(dir string) string {
		return `{"name": "w", "main": "worker.js", "compatibility_date": "2025-10-08",
			"d1_databases": [{"binding": "DB", "database_name": "db", "migrations_dir": "` + dir + `"}]}`
	}
	assets := func(dir string) string {
		return `{"name": "w", "main": "worker.js", "compatibility_date": "2025-10-08", "assets": {"directory": "` + dir + `"}}`
	}
	cases := []struct {
		name   string
		config string
		links  map[string]string // link name in the project -> target
		bundle bool
		want   string
	}{
		{name: "migration file links out", config: d1("migrations"), links: map[string]string{"migrations/0001_keys.sql": key}, want: "refused"},
		{name: "migrations dir links out", config: d1("migrations"), links: map[string]string{"migrations": home}, want: "refused"},
		{name: "migrations_dir escapes", config: d1("../elsewhere"), want: "outside the project"},
		{name: "migrations_dir absolute", config: d1(home), want: "outside the project"},
		{name: "assets.directory escapes", config: assets("../x"), want: "outside the project"},
		{name: "assets.directory absolute", config: assets(home), want: "outside the project"},
		{name: "assets.directory links out", config: assets("public"), links: map[string]string{"public": home}, want: "symbolic link"},
		{name: "bundle module links out", config: assets("public"), links: map[string]string{"bundle/keys.js": key}, bundle: true, want: "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"wrangler.json": tc.config, "worker.js": "export default {}", "bundle/worker.js": "export default {}"})
			for link, target := range tc.links {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, link)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
					t.Fatal(err)
				}
			}
			o := Options{Path: dir, Image: "r.example/w:1", AssetsImage: "r.example/w:1"}
			if tc.bundle {
				o.Bundle = filepath.Join(dir, "bundle")
			}
			res, err := Import(o)
			var text string
			if res != nil {
				text = joinIssues(res.Unsupported)
				for _, cm := range res.ConfigMaps {
					for _, v := range cm.Data {
						text += v
					}
				}
				for _, m := range res.Image.Modules {
					text += string(m.Data)
				}
			}
			if err != nil {
				text += err.Error()
			}
			if strings.Contains(text, "PRIVATE KEY") {
				t.Fatalf("the key outside the project was published: %s", text)
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("error/issues %q, want one saying %q", text, tc.want)
			}
		})
	}
}
