package node

import "github.com/p2pc/p2pc/internal/trust"

// testCreds are one member's credentials of a fresh swarm.
var testCreds = trust.TestMember()
