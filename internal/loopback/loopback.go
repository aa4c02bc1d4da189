package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// FreeAddr returns "127.a.b.c:port", a random address in 127.128.0.0/9 and a port that
// was free on it a moment ago. Linux routes all of 127.0.0.0/8 to the loopback
// interface, so the address needs no set-up. Errors: the listen that finds the port
// failed (after a few addresses).
func FreeAddr() (string, error) {
	var err error
	for i := 0; i < 8; i++ {
		ip := fmt.Sprintf("127.%d.%d.%d", 128+rand.IntN(127), rand.IntN(256), 1+rand.IntN(254))
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); err == nil {
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("loopback: no free address: %w", err)
}
