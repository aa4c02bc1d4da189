package outbound_test

import (
	"net/netip"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
)

// entries the fuzzer combines into allow and deny lists.
var fuzzEntries = []string{"public", "private", "local", "127.0.0.0/8", "::1/128", "10.0.0.0/8",
	"169.254.169.254/32", "0.0.0.0/0", "::/0", "fd00::/8", "203.0.113.0/24", "2001:db8::/32"}

// workerdAllows models workerd's network service on the rendered lists: it compares the
// destination as written (no unmapping) with entries of its own family; the tokens'
// ranges are those TestTokenRangesMatchWorkerd checks (0.0.0.0/8 and a mapped address
// count as public there).
func workerdAllows(r outbound.Rules, a netip.Addr) bool {
	in := func(list []string) bool {
		for _, e := range list {
			if rawMatch(e, a) {
				return true
			}
		}
		return false
	}
	allow := r.Allow
	if len(allow) == 0 {
		allow = []string{"public"}
	}
	return in(allow) && !in(r.Deny)
}

func rawMatch(entry string, a netip.Addr) bool {
	private := []string{"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7", "fe80::/10"}
	any := func(ps []string) bool {
		for _, p := range ps {
			if netip.MustParsePrefix(p).Contains(a) {
				return true
			}
		}
		return false
	}
	switch entry {
	case "public":
		return !any(private) && !any([]string{"224.0.0.0/3", "ff00::/8"})
	case "private":
		return any(private)
	case "local":
		return any([]string{"127.0.0.0/8", "::1/128"})
	}
	return netip.MustParsePrefix(entry).Contains(a)
}

// FuzzOutboundDecision: for any address and lists, the sidecar's dial check
// (Rules.Allows), workerd on the rendered lists (Rendered) and admission (Denies: an
// address it refuses is never reached) agree.
func FuzzOutboundDecision(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "::", "::ffff:169.254.169.254", "8.8.8.8", "::1", "fd00::1"} {
		a := netip.MustParseAddr(s).As16()
		f.Add(a[:], !netip.MustParseAddr(s).Is4(), uint16(0b1), uint16(0b1000))
	}
	f.Fuzz(func(t *testing.T, b []byte, v6 bool, allowBits, denyBits uint16) {
		var a16 [16]byte
		copy(a16[:], b)
		a := netip.AddrFrom16(a16)
		if !v6 {
			a = netip.AddrFrom4([4]byte(a16[12:]))
		}
		pick := func(bits uint16) (out []string) {
			for i, e := range fuzzEntries {
				if bits&(1<<i) != 0 {
					out = append(out, e)
				}
			}
			return out
		}
		r := outbound.Rules{Allow: pick(allowBits), Deny: pick(denyBits)}
		sidecar, workerd := r.Allows(a), workerdAllows(outbound.Rendered(r), a)
		if sidecar != workerd {
			t.Fatalf("%s under %+v: sidecar %v, workerd on the rendered lists %v", a, r, sidecar, workerd)
		}
		if outbound.Denies(r.Deny, a) && sidecar {
			t.Fatalf("%s under %+v: admission refuses it, the sidecar connects", a, r)
		}
	})
}
