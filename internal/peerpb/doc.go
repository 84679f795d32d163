// Package peerpb is the p2pc peer protocol between a job's coordinator
// and a peer: the generated code of peer.proto (the Info call and the Work
// session), the protocol's constants such as ProtocolVersion and
// ErrRefused, and both ends of the HostCall encoding of a task's
// shared-state calls: HostClient on the peer, ServeHost on the
// coordinator.
//
// The coordinator (internal/job) and the peer (internal/node) meet here
// and never import each other. docs/protocol.md explains the conversation.
package peerpb
