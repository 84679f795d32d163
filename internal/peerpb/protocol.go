package peerpb

import "errors"

// ProtocolVersion is the peer protocol version this build speaks: a
// coordinator puts it in Hello, a peer in InfoResponse, and each refuses
// another.
const ProtocolVersion = 2

// MaxBatch bounds the leases (or results) in one Leases (Results)
// message, and MaxBatchBytes their size, the coordinator's and the peers'
// alike: a batch saves per-message costs on both sides when many slots free
// up at once, and stays a small message.
const (
	MaxBatch      = 256
	MaxBatchBytes = 1 << 20
)

// ErrRefused: the peer will not take part in the job (it answered Hello
// with Refuse: protocol version, platform, or its own reasons). Whoever
// enrols peers does not enrol it again for this job.
var ErrRefused = errors.New("peer refused the job")

// HostCall.Op values: a task's sdk.Host calls that a peer tunnels to the
// coordinator, which holds the job's shared state.
const (
	OpSend       = "send"
	OpRecv       = "recv"
	OpLoad       = "load"
	OpStore      = "store"
	OpCAS        = "cas"
	OpCheckpoint = "checkpoint"
	OpResume     = "resume"
)
