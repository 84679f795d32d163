package node

import "net"

// LocalIPFor returns the local IP the kernel would use to reach addr
// (host:port), without sending anything: the address to advertise to
// peers on that network. It returns "" if there is no route.
func LocalIPFor(addr string) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}
