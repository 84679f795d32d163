// Package transfer moves content-addressed blocks between p2pc peers: a
// Server that serves a blocks.Store over the read-only p2pc.blocks.v1
// gRPC service, with block data on a simpler bulk path where the server
// offers one; a Fetcher that fetches a whole file from many peers at once;
// a RemoteStore view of one peer; and the connection Pool they share.
//
// Invariants:
//
//   - The receiver trusts nothing: every block is checked against its
//     length in the manifest and against its ID before it is stored, and
//     that is the only hash of it on the receiving side.
//   - A peer that sends bad data is banned for the rest of the fetch; the
//     blocks of a failed request go back to be fetched from another holder.
//   - A block counts as fetched only once the store has committed it,
//     so a killed fetch resumes with what the store holds.
//   - A server validates every request before it touches its store, and
//     caps connections that have not finished their TLS handshake.
//
// The wire protocol is in docs/protocol.md, "Block transfer", and the
// fetcher's scheduling and the bulk path in docs/design/transfer.md.
// Lock order: Pool.mu before bulkPeer.mu; muxListener.mu before gate.mu; the others are leaves.
package transfer
