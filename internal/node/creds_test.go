package node

import "github.com/p2pc/p2pc/internal/trust"

// testCreds are one member's credentials of a fresh swarm.
var testCreds = func() *trust.Creds {
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
