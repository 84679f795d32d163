package transfer

import "github.com/p2pc/p2pc/internal/trust"

// testCreds are one member's credentials of a fresh swarm: both ends of
// the tests' connections use them.
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
