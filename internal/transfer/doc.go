// Package transfer moves content-addressed blocks between p2pc peers over
// gRPC, with block data on a simpler bulk path beside it where the
// server offers one: a Server that serves a blocks.Store, a Fetcher that
// fetches a whole file from many peers at once, a RemoteStore view of one
// peer, and the connection Pool they share.
//
// # Wire protocol (p2pc.blocks.v1, transferpb/blocks.proto)
//
// One gRPC service, Blocks, read-only, over HTTP/2 on mutual TLS 1.3 (the
// tls.Config comes from package trust: only members of the swarm connect;
// integrity of blocks also comes from the content addresses):
//
//	rpc Have(HaveRequest{version, ids})  returns (HaveResponse{version, bitmap})
//	rpc Get(GetRequest{version, ids})    returns (stream Block{id, status, data})
//
// The rules:
//
//   - An ID is 32 bytes: the SHA-256 of a block's bytes. A file's ID is the
//     ID of its manifest block (see package blocks).
//   - Have takes 1 to MaxHaveIDs (4096) IDs and answers a bitmap: bit i
//     (byte i/8, bit i%8, least significant bit first) is set when the
//     server holds ids[i]; the bitmap is exactly ceil(n/8) bytes.
//   - Get takes 1 to MaxGetIDs (256) IDs and streams exactly one Block per
//     ID, in request order, each echoing its ID: status OK with the bytes,
//     or status NOT_FOUND with no bytes. A missing block is never skipped
//     silently, so a short stream is a protocol error.
//   - version is the protocol version the client speaks (0 reads as 1).
//     A server answers a version newer than its own with
//     FAILED_PRECONDITION; HaveResponse carries the server's version.
//   - Every message is at most MaxMessageSize (MaxBlockSize + 64 KiB)
//     either way; GRPCServerOptions and DialOptions set those bounds (and
//     flow-control windows sized for 1 MiB blocks).
//   - A server validates every request before touching its store: a wrong
//     ID length, no IDs or too many are INVALID_ARGUMENT; it never panics
//     on hostile input (FuzzBlockMessage).
//
// The receiver trusts nothing it is sent: every block is checked against
// the length the manifest gives and against its ID (blocks.Verify) before
// it is stored. That is the one hash of the block on the receiving side:
// the store takes the Verified block without hashing it again
// (blocks.PutVerified, blocks.Batch). The sending side checks what it
// reads from its disk store against the CRC32C recorded with the block
// (blocks.DiskStore.ReadBlock, which quarantines a damaged block); see
// package blocks, "Verification on read", for why that is enough there.
//
// # Bulk path (p2pc.bulk.v1)
//
// gRPC's HTTP/2 framing costs about as much CPU as the hash of the block
// on each side (16 KiB frames, each copied into and out of gRPC's
// buffers), so a fetcher moves block data over its own connections
// when the server offers it, on the same port, also mutual TLS 1.3:
//
//   - Server.Listener(l, tls) wraps the gRPC server's listener. It reads the
//     first 8 bytes of every connection: "P2PCBLK1" makes it a bulk
//     connection, served by the Server itself; anything else (the HTTP/2
//     preface) goes to gRPC with those bytes put back. A server whose
//     connections come through it sets the response header
//     "p2pc-bulk: 1" on its Have answers; a fetcher uses the bulk path
//     only with a peer that advertised it. A server without it is
//     gRPC-only, as before, and FetchOptions.NoBulk keeps a fetcher on
//     gRPC.
//     Until its TLS handshake is done (gRPC's too: the server credentials
//     tell), a connection counts against caps per source address and in
//     total (MaxHandshakingPerIP, MaxHandshaking); at a cap the oldest
//     unfinished connection (of the same source, else of the source
//     holding the most) is closed for the new one. One that sends nothing
//     within FirstBytesTimeout, or has not finished HandshakeTimeout after
//     it was accepted, is closed (gate.go).
//   - The client sends the magic in the clear, then the connection is
//     mutual TLS with the same configuration as gRPC's (a refused
//     handshake is logged once per address); the server answers the
//     magic inside TLS. Then the client
//     sends requests, one at a time: a big-endian uint32 n (1 to
//     MaxGetIDs) and n IDs of 32 bytes; the server answers each ID in
//     order with a 37-byte header (the ID, a status byte: 0 OK,
//     1 NOT_FOUND, a big-endian uint32 length, 0 with NOT_FOUND) and the
//     data. The connection is reused for the next request; the server
//     closes it on a malformed request, on a store failure, or after
//     2 minutes idle.
//   - The client checks every header as getStream checks a Block message
//     (echoed ID, known status, no data with NOT_FOUND, length within
//     MaxBlockSize) before reading the data, which it reads straight into
//     a pooled, 4 KiB-aligned buffer; the data is then verified, stored
//     and penalised exactly as data that came over gRPC: the fetcher's
//     scheduling, deadlines, bans and retries are the same for both.
//   - A fetch keeps up to PerPeer bulk connections busy per peer and
//     keeps idle ones for reuse (a reused connection that turns out to be
//     closed is replaced, the request sent again, without penalty). A
//     peer whose bulk connection cannot be opened (refused, or the
//     handshake fails) is used over gRPC for the next minute.
//
// The server writes each answer with one writev of its header and the
// buffer the block was read into; fault injection and the rate limit
// apply to both paths alike.
//
// # Encoding
//
// On gRPC, the messages are the protobuf encoding of transferpb,
// unchanged on the wire; blockCodec only avoids copies. A client decodes each Block into a
// pooled buffer, copying the received bytes once, and places the data
// field on a 4 KiB boundary so that a file written with direct I/O takes
// it as it is. A server built with GRPCServerOptions sends a block's data
// from the buffer it read it into, without copying it into a marshalled
// message; the buffer returns to the pool once gRPC has written it. A
// server built without those options (any grpc.Server) encodes the same
// bytes through gRPC's own codec.
//
// # Fetching
//
// Fetcher.Fetch(ctx, file, peers, progress) first gets the manifest block
// (from the local store, else from the peers in random order), then works
// out which distinct blocks are missing locally. Blocks already held are
// never fetched again, so a fetch that was killed resumes where it
// stopped: the disk store makes every held block complete and verified.
//
// Holders are learned by asking every peer Have about the missing blocks,
// and asked again every RefreshInterval (only about the blocks a peer is
// not yet known to hold), so a file spreads: a peer that has fetched some
// blocks serves them to the next.
//
// Scheduling follows Preon's random-block balancer: each request goes for
// a random missing block, to a random peer among those known to hold it
// that has a free slot. Concurrency bounds the requests in flight (16) and
// PerPeer those to one peer (4); a request asks for more than one block
// only when blocks are smaller than BatchBytes (1 MiB), and then only for
// blocks the chosen peer holds. Since the first block of every request is
// random, peers that join a swarm together do not all start at block 0.
//
// Every request has a deadline (RequestTimeout). A peer that answers with
// bad data (wrong hash, wrong length, oversized message, an answer for an
// ID not asked) is banned for the rest of the fetch. A peer that errors
// or times out is cooled down for a growing backoff, a timeout also
// halves its request bound (it grows back one success at a time), and
// MaxPeerFailures failures in a row drop it. The blocks of a failed
// request go back to the pool and are retried from another holder. A
// fetch fails with ErrNoHolder when no live peer is left, or when it has
// made no progress for GiveUp with nothing in flight.
//
// A peer's slot is freed as soon as its answer is in; the worker that
// received the blocks then verifies them (crypto/sha256, one block at a
// time, at once) and writes them, so Concurrency bounds requests, hashing
// and writes together and neither the hashing nor the disk idles the
// network. Hashing is most of a receiver's CPU; the workers run in
// parallel, so it spreads over the cores. A block that fails verification
// bans its sender and goes back to the pool.
//
// Into a blocks.DiskStore, fetched blocks go through a blocks.Batch: each
// is written to a temporary file as it arrives, and every CommitBytes
// (32 MiB) or CommitInterval (1s) the batch is made durable in one pass.
// Following the store's rule (state after data), a block counts as
// fetched, in the stats and the progress, only once its batch is
// committed; a fetch that is killed loses at most its uncommitted batch,
// and the next one fetches only what the store lacks.
//
// Fetcher.FetchFile also writes the file to a destination, atomically. When
// the store is a blocks.DiskStore on the destination's file system it
// writes every byte once: each block, verified, goes straight to its
// offsets in a partial file inside the store (by direct I/O where the file
// system takes it), which, complete, is fsynced, becomes a whole file of
// the store, and is hard-linked to the destination (temporary name,
// rename, fsync of the directory). The store then holds the file's blocks
// through it; a killed FetchFile leaves the partial file, whose blocks the
// next one re-verifies and reuses. Elsewhere (another store, another file
// system) the blocks go to the store as Fetch stores them and to a
// temporary file next to the destination as they land, fsynced and renamed
// into place once complete.
//
// FetchStats reports, per peer, the blocks and bytes it served, its
// requests, failures, timeouts and bad answers, and whether it was banned
// or dropped; Progress (with the optional ProgressTotal) reports bytes in
// place as they land, for a progress bar kept outside this package.
//
// # Fault injection
//
// ServerOptions.Corrupt, Truncate and StallAfter make a server misbehave,
// for tests of the defences above; they are settable only from Go and
// through hidden `p2pc blocks serve` flags, and a server with any of them
// logs a warning when it starts. ServerOptions.RateLimit caps a server's
// upload rate, to model slow uplinks in tests and benchmarks.
// Lock order: Pool.mu before bulkPeer.mu; muxListener.mu before gate.mu; the others are leaves.
package transfer
