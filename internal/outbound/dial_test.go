package outbound_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
)

// TestAllows: an address passes the rules as workerd's network service passes it (the
// token ranges TestTokenRangesMatchWorkerd checks): inside an allow entry (none: public,
// workerd's default) and no deny entry; an IPv4-mapped IPv6 address is its IPv4 one.
func TestAllows(t *testing.T) {
	def := outbound.Rules{Allow: []string{"public", "10.96.0.0/12"}, Deny: []string{"203.0.113.7/32"}}
	cases := []struct {
		rules outbound.Rules
		addr  string
		want  bool
	}{
		{def, "8.8.8.8", true},
		{def, "10.96.0.10", true},
		{def, "169.254.169.254", false}, // instance metadata: private, not allowed
		{def, "::ffff:169.254.169.254", false},
		{def, "10.0.0.1", false},
		{def, "127.0.0.1", false},
		{def, "203.0.113.7", false}, // public but denied
		{def, "224.0.0.1", false},   // reserved: no token allows it
		{outbound.Rules{Allow: []string{"private"}, Deny: []string{"169.254.0.0/16"}}, "169.254.169.254", false},
		{outbound.Rules{Allow: []string{"private"}, Deny: []string{"169.254.0.0/16"}}, "10.1.2.3", true},
		{outbound.Rules{}, "8.8.8.8", true},
		{outbound.Rules{}, "10.1.2.3", false},
		{outbound.Rules{Allow: []string{"local"}}, "127.0.0.1", true},
		{outbound.Rules{Allow: []string{"public"}, Deny: []string{"public"}}, "8.8.8.8", false},
	}
	for _, c := range cases {
		if got := c.rules.Allows(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("%+v Allows(%s) = %v, want %v", c.rules, c.addr, got, c.want)
		}
	}
}

// TestDialControl: a dialer with the rules' Control refuses an address the rules do not
// allow at connect time, after DNS ("localhost" resolves to a loopback address), so a
// name that resolves elsewhere later (DNS rebinding) gains nothing; its error carries
// workerd's refusal phrase, which internal/failure reads as outbound_denied.
func TestDialControl(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	public := outbound.Rules{Allow: []string{"public"}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := (&net.Dialer{Control: public.Control}).Dial("tcp", net.JoinHostPort(host, port))
		if err == nil || !strings.Contains(err.Error(), "connecting to 127.0.0.1:"+port+" is not allowed") || !strings.Contains(err.Error(), outbound.Doc) {
			t.Errorf("dial %s under %+v: %v, want a refusal naming the address and %s", host, public, err, outbound.Doc)
		}
	}
	local := outbound.Rules{Allow: []string{"local"}}
	c, err := (&net.Dialer{Control: local.Control}).Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatalf("dial under %+v: %v", local, err)
	}
	c.Close()
}

// TestRulesJSON: the sidecar reads the rules from JSON (podcontract.SidecarOutboundEnv).
func TestRulesJSON(t *testing.T) {
	b, err := json.Marshal(outbound.Rules{Allow: []string{"public"}, Deny: []string{"169.254.0.0/16"}})
	if err != nil || string(b) != `{"allow":["public"],"deny":["169.254.0.0/16"]}` {
		t.Errorf("JSON %s, %v", b, err)
	}
}
