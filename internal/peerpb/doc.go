// Package peerpb holds the generated code of the p2pc peer protocol
// (peer.proto): the Info call and the Work session between a job's
// coordinator and a peer. docs/protocol.md explains the conversation.
package peerpb
