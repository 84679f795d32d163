package transferbench

import "github.com/p2pc/p2pc/internal/trust"

// benchCreds are one member's credentials of a fresh swarm: the transfer
// benchmarks measure TLS like a real swarm pays it.
var benchCreds = func() *trust.Creds {
	s, err := trust.NewSecret()
	if err != nil {
		panic(err)
	}
	c, err := trust.Ephemeral(s)
	if err != nil {
		panic(err)
	}
	return c
}()
