package loopback

import (
	"net"
	"testing"
)

// TestFreeAddr: the address is in 127.128.0.0/9, and a server can listen on it and be
// reached there.
func TestFreeAddr(t *testing.T) {
	_, want, _ := net.ParseCIDR("127.128.0.0/9")
	for i := 0; i < 20; i++ {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(host); !want.Contains(ip) {
			t.Fatalf("%s is outside %s", a, want)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		c.Close()
		l.Close()
	}
}
