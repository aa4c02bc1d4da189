package outbound

import "net/netip"

// mappedRange is IPv4-mapped IPv6 (RFC 4291 §2.5.5.2): on a dual-stack socket a
// connection to ::ffff:a.b.c.d reaches the IPv4 host a.b.c.d.
var mappedRange = netip.MustParsePrefix("::ffff:0:0/96")

// Normalize is the address a connection to a reaches, in one form, which every check
// (admission, the renderer's lists, the sidecar's dialers) compares: an IPv4-mapped
// address is its IPv4 address, the zone is dropped, and an unspecified address
// (0.0.0.0, ::) is loopback, where Linux connects it. IPv4-compatible addresses
// (::a.b.c.d, deprecated by RFC 4291) and NAT64 ones are IPv6 addresses of their own:
// the kernel does not route them to IPv4 hosts. Literals such as 0x7f.1 or 2130706433
// are not addresses to netip, so they never reach here as one (a name is checked
// after DNS, at dial time).
func Normalize(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	switch {
	case a.IsUnspecified() && a.Is4():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case a.IsUnspecified():
		return netip.IPv6Loopback()
	}
	return a
}

// normalizePrefix is p in one form: a range inside the IPv4-mapped block is its IPv4
// range. A range holding the whole block keeps its IPv6 form (Within counts it as
// holding every IPv4 address).
func normalizePrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// reachesLocal reports whether p holds an address that connects to the host itself
// besides loopback: 0.0.0.0 or ::.
func reachesLocal(p netip.Prefix) bool {
	return p.Contains(netip.IPv4Unspecified()) || p.Contains(netip.IPv6Unspecified())
}

// Rendered is r as workerd's network service gets it: workerd compares an IPv6
// destination only with IPv6 entries, so it is also told to deny the IPv4-mapped block
// and the unspecified addresses (which reach loopback).
// Rules.Allows decides the same for every address (FuzzOutboundDecision).
func Rendered(r Rules) Rules {
	return Rules{Allow: r.Allow, Deny: append(append([]string(nil), r.Deny...), mappedRange.String(), "0.0.0.0/32", "::/128")}
}

// Denies reports whether deny holds addr (Normalize'd; an IPv4-mapped address is
// refused, as by Rules.Allows): admission's check of an address written in an object.
func Denies(deny []string, addr netip.Addr) bool {
	if refused(addr) && len(deny) > 0 {
		return true
	}
	a := Normalize(addr)
	return Within(netip.PrefixFrom(a, a.BitLen()).String(), deny)
}

// refused reports the destination forms refused whatever the lists: IPv4-mapped and
// unspecified addresses.
func refused(a netip.Addr) bool {
	a = a.WithZone("")
	return a.Is4In6() || a.IsUnspecified()
}
