package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseAssetUploads reads the debug log of wrangler 4.164.0's `deploy --dry-run`
// (the lines buildAssetManifest writes, copied from a run on a Vite React build): the
// upload list is every entry read, less directories and the entries logged as ignored.
func TestParseAssetUploads(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{".assetsignore", "index.html", "assets/index-C5HQuB2j.js", "assets/index-D64VDMd1.css"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, log string
		want      []string
		err       string
	}{
		{
			name: "listing",
			log: "Metrics dispatcher: Dispatching disabled\n\u2728 Read 5 files from the assets directory " + dir + "\n" +
				"/.assetsignore\n/assets\n/index.html\n/assets/index-C5HQuB2j.js\n/assets/index-D64VDMd1.css\n" +
				"Ignoring asset: .assetsignore\nTotal Upload: 0.31 KiB / gzip: 0.23 KiB\n",
			want: []string{"assets/index-C5HQuB2j.js", "assets/index-D64VDMd1.css", "index.html"},
		},
		{name: "no assets", log: "Total Upload: 0.31 KiB\n", err: "no asset directory listing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAssetUploads(tc.log)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
