package outbound_test

import (
	"net/netip"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
)

// Other spellings of an IPv4 address or range are checked as that address or range:
// IPv4-mapped IPv6 (RFC 4291 §2.5.5.2) reaches the IPv4 host on a dual-stack socket,
// and 0.0.0.0 or :: as a destination reaches the host itself (Linux connects to
// loopback), so each counts as what it reaches, in admission and at dial time.
func TestAlternateFormsWithin(t *testing.T) {
	bound := []string{"public"}
	for _, entry := range []string{"::ffff:0:0/96", "::ffff:169.254.169.254", "::ffff:127.0.0.1/128", "::ffff:0:0/95", "0.0.0.0/32", "::/128"} {
		if outbound.Within(entry, bound) {
			t.Errorf("Within(%q, public) = true; it is not public", entry)
		}
	}
	if got, err := outbound.Parse("::ffff:10.0.0.0/104"); err != nil || got != "10.0.0.0/8" {
		t.Errorf(`Parse("::ffff:10.0.0.0/104") = %q, %v; want its IPv4 form 10.0.0.0/8`, got, err)
	}
}

func TestAlternateFormsDial(t *testing.T) {
	deny := outbound.Rules{Allow: []string{"public", "private"}, Deny: []string{"127.0.0.0/8", "::1/128"}}
	for _, a := range []string{"0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"} {
		if deny.Allows(netip.MustParseAddr(a)) {
			t.Errorf("Allows(%s) under deny 127.0.0.0/8, ::1 = true; it reaches loopback", a)
		}
	}
	if deny.Allows(netip.MustParseAddr("::ffff:8.8.8.8")) {
		t.Error("Allows(::ffff:8.8.8.8) = true; an IPv4-mapped destination is refused (workerd's rendered lists deny the block)")
	}
}
