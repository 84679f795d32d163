package peerpb

import (
	"errors"
	"strings"
	"time"
)

// ProtocolVersion is the peer protocol version this build speaks: a
// coordinator puts it in Hello, a peer in InfoResponse, and each refuses
// another. Version 3: output digests use the length-prefixed listing
// (internal/outputs), so a peer of version 2 would disagree on every one.
// Version 4: a Hello carries what a task needs as one Resources message
// (field 19) instead of fields 13-16, which a peer of version 3 would
// read as no requirement at all.
const ProtocolVersion = 4

// MaxBatch bounds the leases (or results) in one Leases (Results)
// message, and MaxBatchBytes their size, the coordinator's and the peers'
// alike: a batch saves per-message costs on both sides when many slots free
// up at once, and stays a small message.
const (
	MaxBatch      = 256
	MaxBatchBytes = 1 << 20
)

// MaxAcks bounds the IDs (lease IDs and task IDs together) in one Acks
// message.
const MaxAcks = 4096

// LeaseGrace: a coordinator revokes a lease that has run longer than its
// job's task timeout plus LeaseGrace (the backstop for a peer that hangs
// with its connection up) and charges the peer with it. A peer whose
// tasks were paused (p2pc join --pause-when-busy: frozen time does not
// count against a task's timeout) gives such a lease back as canceled
// before then, so it is seen as slow, not as dead.
const LeaseGrace = 10 * time.Second

// ErrRefused: the peer will not take part in the job (it answered Hello
// with Refuse: protocol version, platform, or its own reasons). Whoever
// enrols peers does not enrol it again for this job, unless the refusal
// may pass (RefusalPasses).
var ErrRefused = errors.New("peer refused the job")

// RefusePrepare begins the reason of a peer that could not prepare the
// job (fetch or store the plugin or an input: its disk full, a holder
// unreachable): a cause that may pass, so the job asks it again later.
// Every other refusal (protocol, platform, the peer's settings) is final
// for the job.
const RefusePrepare = "cannot prepare the job: "

// RefuseBusyID begins the reason a coordinator gives for not enrolling
// a peer whose node ID (the one its handshake proved) has a session open
// under another name: one node is one worker. It may pass (that session
// ends).
const RefuseBusyID = "node ID enrolled already: "

// RefuseStale begins the reason of a peer that refuses a coordinator of
// a job handed to the swarm because it has seen a later owner of the job
// (Hello.epoch lower than the highest it has seen): the coordinator has
// been fenced off, final.
const RefuseStale = "stale owner: "

// RefusalPasses reports whether a refusal with this reason may pass.
func RefusalPasses(reason string) bool {
	return strings.HasPrefix(reason, RefusePrepare) || strings.HasPrefix(reason, RefuseBusyID)
}

// RefusedError is a peer's refusal; it is ErrRefused.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return ErrRefused.Error() + ": " + e.Reason }

func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

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
