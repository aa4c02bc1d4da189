package testenv

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// RunSpec on Cloudflare's hello-world-do-template spec, which expects the text
// "Hello, World!" visible on the page at templateUrl: a page showing it passes, a page
// showing something else fails with Playwright's report of the assertion.
func TestRunSpec(t *testing.T) {
	if err := BrowserReady(); errors.Is(err, ErrNoChromium) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	spec := SharedFile(t, "testdata", "cloudflare-templates", "playwright-tests", "hello-world-do-template.spec.ts")
	for _, tc := range []struct {
		body    string
		wantErr []string // substrings of the error; none: RunSpec passes
	}{
		{body: "Hello, World!"},
		{body: "Hello, Nobody!", wantErr: []string{"- text: Hello, Nobody!", "getByText('Hello, World!')", "toBeVisible", "1 failed"}},
	} {
		t.Run(tc.body, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			err := RunSpec(spec, srv.URL)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("RunSpec passed on a page showing %q", tc.body)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}
