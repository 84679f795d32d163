package transferbench

import "github.com/p2pc/p2pc/internal/trust"

// benchCreds are one member's credentials of a fresh swarm: the transfer
// benchmarks measure TLS like a real swarm pays it.
var benchCreds = trust.TestMember()
