package outbound

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// Allows reports whether workerd's network service with r lets a connection to addr
// through: addr lies within an allow entry (no entry: public, workerd's own default)
// and within no deny entry. An IPv4-mapped or unspecified destination is refused
// outright, as the rendered lists make workerd refuse it (Rendered): a connection to an
// IPv4 host is made to its IPv4 address, to loopback to 127.0.0.1 or ::1.
func (r Rules) Allows(addr netip.Addr) bool {
	if refused(addr) {
		return false
	}
	addr = Normalize(addr)
	p := netip.PrefixFrom(addr, addr.BitLen())
	allow := r.Allow
	if len(allow) == 0 {
		allow = []string{Public}
	}
	return Within(p.String(), allow) && !Within(p.String(), r.Deny)
}

// Control is a net.Dialer Control function that refuses, at connect time, an address r
// does not allow: the address actually dialed, after DNS, so a name that resolves to
// another address later (DNS rebinding) gains nothing. The error holds workerd's own
// refusal phrase ("connecting to <addr> is not allowed"), which internal/failure reads
// as outbound_denied.
func (r Rules) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("connecting to %s is not allowed: not an IP address and port", address)
	}
	if r.Allows(ap.Addr()) {
		return nil
	}
	return fmt.Errorf("connecting to %s is not allowed (the Worker's outbound rules: allow %s; deny %s; see %s)",
		address, orNone(r.Allow, Public), orNone(r.Deny, "none"), Doc)
}

func orNone(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

// Dialer is a net.Dialer whose connections obey r (Control).
func (r Rules) Dialer(d net.Dialer) *net.Dialer {
	d.Control = r.Control
	return &d
}
