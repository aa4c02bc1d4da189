// Package outbound is the one model of where a Worker's code may connect: the entries of
// spec.outbound and of the operator's defaults (CIDRs and workerd's tokens public,
// private and local), how an author's list is bounded by the admin's, and which address
// ranges each token stands for (for NetworkPolicy egress). docs/outbound.md.
package outbound

import (
	"fmt"
	"net/netip"
	"strings"
)

// Tokens workerd's network service takes besides CIDRs (workerd.capnp Network.allow).
const (
	Public  = "public"
	Private = "private"
	Local   = "local"
)

// Doc is the document every outbound error cites.
const Doc = "docs/outbound.md"

// Ranges of the tokens as the pinned workerd applies them (checked against workerd
// 1.20261117.1 in TestTokenRangesMatchWorkerd): "private" covers loopback too, and
// "public" is every address that is neither private nor multicast/reserved (224.0.0.0/3,
// which no token allows; 0.0.0.0/8 counts as public).
var (
	localRanges   = prefixes("127.0.0.0/8", "::1/128")
	privateRanges = prefixes("10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7", "fe80::/10")
	reservedRanges = prefixes("224.0.0.0/3", "ff00::/8")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// DefaultAllow is the operator's default allow list (manager flag
// --outbound-default-allow, Helm outbound.defaultAllow): the public internet, kubeadm's
// default Service CIDR and the Pod CIDR of kind and of flannel's default. Set it to your
// cluster's Service and Pod CIDRs.
var DefaultAllow = []string{Public, "10.96.0.0/12", "10.244.0.0/16"}

// Rules are the allow and deny lists of workerd's network service.
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Parse checks one entry: a token or a CIDR (an address alone means a /32 or /128).
// The result is the entry as workerd should get it (CIDRs in canonical form).
func Parse(entry string) (string, error) {
	switch entry {
	case Public, Private, Local:
		return entry, nil
	}
	p, err := parsePrefix(entry)
	if err != nil {
		return "", fmt.Errorf("%q is neither a CIDR (e.g. 10.96.0.0/12) nor one of public, private, local", entry)
	}
	return p.String(), nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return normalizePrefix(netip.PrefixFrom(a, a.BitLen())), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return normalizePrefix(p), nil
}

// ParseList parses every entry of a list (a flag or a Helm value).
func ParseList(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		p, err := Parse(strings.TrimSpace(e))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Within reports whether entry allows nothing that bound does not: it is in bound, or it
// is a CIDR inside a CIDR of bound or inside the ranges of a token of bound.
func Within(entry string, bound []string) bool {
	for _, b := range bound {
		if b == entry {
			return true
		}
	}
	p, err := parsePrefix(entry)
	if err != nil {
		return false
	}
	for _, b := range bound {
		switch b {
		case Public:
			if !overlapsAny(p, privateRanges) && !overlapsAny(p, reservedRanges) && !p.Overlaps(mappedRange) && !reachesLocal(p) {
				return true
			}
		case Private:
			if insideAny(p, privateRanges) {
				return true
			}
		case Local:
			if insideAny(p, localRanges) || p.Bits() == p.Addr().BitLen() && reachesLocal(p) {
				return true
			}
		default:
			if bp, err := parsePrefix(b); err == nil && inside(p, bp) {
				return true
			}
		}
	}
	return false
}

func inside(p, outer netip.Prefix) bool {
	return p.Addr().Is4() == outer.Addr().Is4() && outer.Bits() <= p.Bits() && outer.Contains(p.Addr())
}

func insideAny(p netip.Prefix, ranges []netip.Prefix) bool {
	for _, r := range ranges {
		if inside(p, r) {
			return true
		}
	}
	return false
}

func overlapsAny(p netip.Prefix, ranges []netip.Prefix) bool {
	for _, r := range ranges {
		if p.Overlaps(r) {
			return true
		}
	}
	return false
}

// Effective is what a Worker's network service gets: the author's allow list, or the
// operator's default when the author gives none; the author's deny list plus the
// admin's, which no Worker can lift.
func Effective(allow, deny []string, defaults Rules) Rules {
	r := Rules{Allow: defaults.Allow}
	if len(allow) > 0 {
		r.Allow = allow
	}
	r.Deny = append(append([]string(nil), deny...), defaults.Deny...)
	return r
}

// UserWorker is r for a user Worker of a dispatch namespace, whose code must reach no
// address of the cluster (other customers' pods, internal ports): r's deny list plus
// every private address and every CIDR of the operator's default allow list (the
// cluster's Service and Pod ranges). Deny wins over allow in workerd.
func UserWorker(r, defaults Rules) Rules {
	deny := append(append([]string(nil), r.Deny...), Private)
	for _, e := range defaults.Allow {
		if e != Public && e != Private && e != Local {
			deny = append(deny, e)
		}
	}
	return Rules{Allow: r.Allow, Deny: deny}
}

// IPBlock is one egress destination of a NetworkPolicy: a CIDR minus the CIDRs in Except.
type IPBlock struct {
	CIDR   string
	Except []string
}

// IPBlocks translates rules into NetworkPolicy ipBlocks: each allowed CIDR or token range
// minus the denied CIDRs and token ranges inside it. Loopback ranges are left out: a
// NetworkPolicy does not govern a pod's own loopback.
func IPBlocks(r Rules) []IPBlock {
	var deny []netip.Prefix
	for _, d := range r.Deny {
		deny = append(deny, ranges(d)...)
	}
	var out []IPBlock
	for _, a := range r.Allow {
		for _, p := range ranges(a) {
			if insideAny(p, localRanges) {
				continue
			}
			b := IPBlock{CIDR: p.String()}
			excepts := deny
			if a == Public {
				excepts = append(append(append([]netip.Prefix(nil), privateRanges...), reservedRanges...), deny...)
			}
			for _, d := range excepts {
				if inside(d, p) && d != p {
					b.Except = append(b.Except, d.String())
				}
			}
			if !insideAny(p, deny) {
				out = append(out, b)
			}
		}
	}
	return out
}

// ranges are the address ranges of an entry: a token's ranges (public: all addresses,
// IPBlocks takes the rest out), or the CIDR.
func ranges(entry string) []netip.Prefix {
	switch entry {
	case Public:
		return prefixes("0.0.0.0/0", "::/0")
	case Private:
		return privateRanges
	case Local:
		return localRanges
	}
	p, err := parsePrefix(entry)
	if err != nil {
		return nil
	}
	return []netip.Prefix{p}
}
