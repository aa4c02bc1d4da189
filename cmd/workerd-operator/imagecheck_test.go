package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// The init container's log, as the kubelet hands it to status.lastFailure (the tail of
// the log with FallbackToLogsOnError, main's "error: " line last), classifies as
// image_link_outside with evidence naming the field, the file and its target; a tree
// whose links stay inside passes.
func TestImageCheckCommand(t *testing.T) {
	good, bad := t.TempDir(), t.TempDir()
	for _, l := range []struct{ dir, name, target string }{
		{good, "alias.html", "index.html"},
		{bad, "alias.html", "index.html"},
		{bad, "key.txt", "../tls/tls.key"},
	} {
		if err := os.Symlink(l.target, filepath.Join(l.dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := runImageCheck(&out, []string{"spec.assets=" + good}); err != nil {
		t.Fatalf("in-tree link refused: %v\n%s", err, out.String())
	}
	out.Reset()
	err := runImageCheck(&out, []string{"spec.source.image=" + good, "spec.assets=" + bad})
	if err == nil {
		t.Fatalf("a link out of the volume passed:\n%s", out.String())
	}
	log := out.String() + "error: " + err.Error() + "\n"
	cause, evidence := failure.Diagnose(failure.Termination{ExitCode: 1, Reason: "Error", Message: log})
	if cause != failure.CauseImageLinkOutside {
		t.Errorf("cause %s, want %s; log:\n%s", cause, failure.CauseImageLinkOutside, log)
	}
	for _, want := range []string{"spec.assets", `"key.txt"`, `"../tls/tls.key"`} {
		if !strings.Contains(evidence, want) {
			t.Errorf("evidence %q lacks %s", evidence, want)
		}
	}
}
