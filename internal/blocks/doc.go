// Package blocks is p2pc's content-addressed storage: SHA-256 IDs,
// fixed-size blocks, manifests that describe a file as an ordered list of
// blocks, and stores (memory, disk) that verify blocks on read and on
// write. A file's ID is the ID of its manifest block, so it names the
// whole content. Plugin binaries, job inputs and task outputs all travel
// between peers as blocks.
//
// Every store implements Store, and blockstest.TestStore pins down their
// common contract. A block is verified against its ID exactly once on its
// way in: Verify returns a Verified, which PutVerified stores without
// hashing it again.
//
// Invariants of a DiskStore, which owns one directory under a held lock:
//
//   - State is written only after the data it describes: a block's name
//     appears only once its bytes are durable, so a crash leaves complete
//     blocks and temporary files, never a partial block under its name.
//     Whoever records state about a block of a Batch does so only after
//     Commit returns. An ephemeral store skips the fsyncs, not the renames.
//   - A block found damaged when read is quarantined and reported as
//     ErrCorrupt. Get checks the SHA-256; ReadBlock, the server's path,
//     checks a CRC32C recorded with the block.
//   - GC never removes a pinned block. With DiskOptions.Hard, a Put that
//     does not fit fails with a *FullError.
//
// The manifest encoding and the on-disk layout are in
// docs/design/blocks.md, with the reasons behind them.
// Lock order: DiskStore.gcMu or pinMu (never both), then mu, then fanMu; expMu, Batch.mu and MemStore.mu are leaves.
package blocks
