// Package requestcf computes request.cf, Cloudflare's IncomingRequestCfProperties
// (https://developers.cloudflare.com/workers/runtime-apis/request/#incomingrequestcfproperties),
// for a request reaching a Worker's pod: the client's address (the connection's peer, or
// what a trusted proxy says with CF-Connecting-IP or X-Forwarded-For), the fields of the
// connection, the cluster's colo name and what the operator's GeoIP databases (MaxMind's
// format) know of the client's address. The sidecar serves it (Handler) to the ingress
// shim (internal/shim ingress.js), which hands it to workerd as the request's cf.
// docs/request-cf.md lists every field and where it comes from.
package requestcf

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// HTTPProtocol is the protocol of requests served by workerd's http socket, which
// speaks HTTP/1.1 only (no TLS, no HTTP/2).
const HTTPProtocol = "HTTP/1.1"

// Config is what the cluster admin gives (the manager's --request-cf-* flags).
type Config struct {
	// Colo is the cf.colo of every request (Cloudflare: the IATA code of the data
	// center); empty leaves it out.
	Colo string
	// TrustedProxies are the peers whose CF-Connecting-IP and X-Forwarded-For are
	// believed; any other peer is the client.
	TrustedProxies []netip.Prefix
	// GeoIP are the databases looked up for the client's address, in order; a field
	// the first one has wins.
	GeoIP []*maxminddb.Reader
}

// Request is what the ingress shim knows of a request: Peer is the connection's
// remote address (workerd's cf.clientIp, with or without a port), ConnectingIP and
// ForwardedFor the values of those headers ("" when absent).
type Request struct {
	Peer, ConnectingIP, ForwardedFor string
}

// Result is the answer to one Request: the client's address (the request's new
// CF-Connecting-IP), whether the peer is a trusted proxy (whose answer depends on the
// headers) and the cf object.
type Result struct {
	ClientIP    string         `json:"clientIp"`
	TrustedPeer bool           `json:"trustedPeer"`
	CF          map[string]any `json:"cf"`
}

// ParseTrustedProxies parses CIDRs or single addresses (a /32 or /128).
func ParseTrustedProxies(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--request-cf-trusted-proxies: %q is neither a CIDR nor an address (docs/request-cf.md)", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Compute is the Result of r. Errors: a peer that is not an address (no Result), a
// failed database lookup (with the Result of the rest).
func (c *Config) Compute(r Request) (Result, error) {
	peer, err := parsePeer(r.Peer)
	if err != nil {
		return Result{}, err
	}
	client, trusted := peer, c.trusted(peer)
	if trusted {
		client = c.forwardedClient(peer, r)
	}
	cf := map[string]any{}
	if c.Colo != "" {
		cf["colo"] = c.Colo
	}
	if client == peer {
		// The connection is the client's own: its fields are known. Through a proxy
		// they are the proxy's, not the client's, and stay out.
		cf["httpProtocol"] = HTTPProtocol
		cf["tlsVersion"] = ""
		cf["tlsCipher"] = ""
		cf["requestPriority"] = ""
	}
	// A failed lookup leaves that database's fields out; the rest stands.
	err = c.geo(client, cf)
	return Result{ClientIP: client.String(), TrustedPeer: trusted, CF: cf}, err
}

func (c *Config) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedClient is the client a trusted proxy names: its CF-Connecting-IP, else the
// last address of X-Forwarded-For that is not itself a trusted proxy (each proxy
// appends the address it received the request from), else the peer.
func (c *Config) forwardedClient(peer netip.Addr, r Request) netip.Addr {
	if a, err := netip.ParseAddr(strings.TrimSpace(r.ConnectingIP)); err == nil {
		return a.Unmap()
	}
	hops := strings.Split(r.ForwardedFor, ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		client = a.Unmap()
		if !c.trusted(client) {
			break
		}
	}
	return client
}

// parsePeer reads workerd's cf.clientIp: "10.0.0.1:5000", "[::1]:5000" or an address.
func parsePeer(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	host, _, err := net.SplitHostPort(s)
	if err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("peer %q is not an address", s)
}
