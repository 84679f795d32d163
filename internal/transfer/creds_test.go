package transfer_test

import "github.com/p2pc/p2pc/internal/trust"

// testCreds are one member's credentials of a fresh swarm: both ends of
// the tests' connections use them.
var testCreds = trust.TestMember()
