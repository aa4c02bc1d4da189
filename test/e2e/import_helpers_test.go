package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// importAndApply is `workerd-operator import PROJECT --bundle BUNDLE --image
// <local registry>/e2e/NAME:1 --push` followed by `kubectl apply`: the image goes to the
// cluster's registry, the kubelet pulls it, and the objects are applied and Ready.
// Each option changes the import's options (e.g. sets R2Endpoint).
func importAndApply(t *testing.T, project, bundle string, opts ...func(*wrangler.Options)) *wrangler.Result {
	t.Helper()
	ctx := context.Background()
	ref := cluster.RegistryHost() + "/e2e/" + strings.ToLower(filepath.Base(project)) + ":1"
	o := wrangler.Options{Path: project, Bundle: bundle, Namespace: sampleNS, Image: ref}
	for _, opt := range opts {
		opt(&o)
	}
	res, m, objs, err := testenv.ImportImage(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s: %d modules, assets %+v", ref, len(m.Modules), m.Assets)
	if err := cluster.Apply(ctx, objs, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = k8sClient.Delete(context.Background(), o)
		}
	})
	if err := cluster.WaitReady(ctx, objs, 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	return res
}

// response is one HTTP exchange's status, headers and body.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) sum() string { s := sha256.Sum256(r.body); return hex.EncodeToString(s[:]) }

// fetch does one request with the given headers (no redirects followed).
func fetch(url string, header map[string]string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}, err
}
