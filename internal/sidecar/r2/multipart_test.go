package r2_test

import (
	"strings"
	"testing"
)

// TestMultipartLifecycle: complete() takes the parts in any order; a second complete()
// rejects (the upload no longer exists); abort() succeeds after abort() and after
// complete() (https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#r2multipartupload-definition:
// "uploadedParts ... need not be in order"; abort "is idempotent").
func TestMultipartLifecycle(t *testing.T) {
	h := newHarness(t)
	res := decode[struct {
		Complete, SecondComplete, AbortAfterComplete, Abort, SecondAbort string
		Size                                                             int64
	}](t, h.post("/lifecycle", map[string]any{"key": "mp/order"}))
	if res.Complete != "ok" || res.Size != 5*1024*1024+4 {
		t.Errorf("complete([part 2, part 1]): %s, size %d; want ok and %d bytes (%s)", res.Complete, res.Size, 5*1024*1024+4, apiRef)
	}
	if !strings.Contains(res.SecondComplete, "(10024)") {
		t.Errorf("a second complete(): %q, want NoSuchUpload (10024) (%s)", res.SecondComplete, errCodes)
	}
	if res.AbortAfterComplete != "ok" || res.Abort != "ok" || res.SecondAbort != "ok" {
		t.Errorf("abort() after complete: %q, abort: %q, abort again: %q; want ok each time (%s)", res.AbortAfterComplete, res.Abort, res.SecondAbort, apiRef)
	}
}
