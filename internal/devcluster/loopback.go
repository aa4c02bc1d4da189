package devcluster

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Pods here share the host's network namespace, so 127.0.0.1 is every pod's. The pod
// contract binds pod-internal listeners (workerd ↔ its sidecar, the runner) to
// podcontract.LoopbackHost; the local cluster gives each pod a second address of its
// own from the pod range and rewrites podcontract.LoopbackHost in the containers' args
// and env to it, so the containers of a pod find each other there and other pods do not
// (they are not told the address; nothing here isolates it: the local cluster has no
// network isolation at all, see docs/local-cluster.md).

// loopbackKey suffixes a pod's key for its loopback address allocation.
const loopbackKey = "#loopback"

// rewriteLoopback replaces podcontract.LoopbackHost in s by loop, where the address is
// not part of a longer one (127.0.0.10).
func rewriteLoopback(s, loop string) string {
	if loop == "" || !strings.Contains(s, podcontract.LoopbackHost) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, podcontract.LoopbackHost)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(podcontract.LoopbackHost)
		before, after := i > 0 && isAddrByte(s[i-1]), end < len(s) && isAddrByte(s[end])
		b.WriteString(s[:i])
		if before || after {
			b.WriteString(podcontract.LoopbackHost)
		} else {
			b.WriteString(loop)
		}
		s = s[end:]
	}
}

func isAddrByte(c byte) bool { return c == '.' || (c >= '0' && c <= '9') }

// linkNestedMounts makes a mount nested in another one (/etc/workerd/tls in
// /etc/workerd) visible under the outer mount's host directory, as a symbolic link, so a
// file read relative to the outer one (workerd's `embed`) finds it.
func linkNestedMounts(mounts []pathMap) {
	for _, in := range mounts {
		for _, out := range mounts {
			rel, ok := strings.CutPrefix(in.from, out.from+"/")
			if !ok {
				continue
			}
			link := filepath.Join(out.to, rel)
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			_ = os.MkdirAll(filepath.Dir(link), 0o755)
			_ = os.Symlink(in.to, link)
		}
	}
}
