package transport

import (
	"context"
	"net"
)

// TCP is the tcp transport: addresses are host:port. It has the Bulk
// capability.
type TCP struct{}

var _ Bulk = TCP{}

// Listen listens on addr (host:port; port 0 picks one).
func (TCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// Dial dials addr.
func (TCP) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// DialBulk dials addr for the bulk path: a plain tcp connection.
func (t TCP) DialBulk(ctx context.Context, addr string) (net.Conn, error) {
	return t.Dial(ctx, addr)
}

// LocalIPFor returns the local IP the kernel would use to reach addr (an
// address of the tcp transport, with or without its scheme), without
// sending anything: the address to advertise to peers on that network.
// It returns "" if there is no route or addr is not a tcp address.
func LocalIPFor(addr string) string {
	scheme, rest := Split(addr)
	if scheme != DefaultScheme {
		return ""
	}
	// Connecting a UDP socket looks the route up and sends nothing.
	c, err := net.Dial("udp", rest)
	if err != nil {
		return ""
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}
