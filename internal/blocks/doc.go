// Package blocks is p2pc's content-addressed storage: SHA-256 IDs,
// fixed-size blocks, manifests that describe a file as an ordered list of
// blocks, and stores (memory, disk) that verify every block on read and on
// write.
//
// A file's ID is the SHA-256 of its manifest's canonical encoding, so the
// file ID names its whole content. Plugin binaries, job inputs and task
// outputs all travel between peers as blocks.
//
// # Stores
//
// Store is the interface every store implements: MemStore (in memory),
// DiskStore (a directory) and the remote store of internal/transfer. The
// conformance suite blockstest.TestStore pins down their common contract:
// Put verifies (ErrCorrupt, ErrTooLarge) and is idempotent, Get verifies
// and reports ErrNotFound or ErrCorrupt, Delete of a missing block is not
// an error, every method honours a done context, and no store keeps the
// caller's slices.
//
// A block is verified against its ID exactly once on its way in. Verify
// hashes it and returns a Verified; PutVerified (VerifiedPutter, which
// MemStore and DiskStore implement) then stores it without hashing again.
// A block fetched from a peer is hashed once, on receipt, and nowhere else
// on the receiving side; Put, for bytes of unknown origin, still hashes.
// BlockReader.ReadBlock reads a block into the caller's buffer, for a
// server that reuses its buffers.
//
// # Files
//
// PutFile cuts a stream into blocks of a chosen size (DefaultBlockSize,
// 1 MiB, unless told otherwise), hashes and stores them with a bounded
// number of workers (at most 5 blocks in memory, whatever the file's
// length), then stores the manifest and returns its ID: the file ID.
// ReadManifest, Missing, WriteFile and ExportFile go the other way;
// ExportFile writes atomically (temporary file in the destination's
// directory, fsync, chmod, rename, fsync of the directory). PutFile writes
// into a DiskStore through a Batch, committing every 32 MiB and before it
// stores the manifest.
//
// # Promised blocks
//
// DiskStore.Expect promises blocks the store does not hold yet (a file
// whose manifest is known before the file is put): until the promise is
// settled, Has reports them held, and a Get or ReadBlock of one not on
// disk signals Expectation.Wanted and waits instead of reporting
// ErrNotFound. Settle(nil) lets the waiting reads read the block from
// disk (verified as any read is; a block the put did not write, because
// the file changed, is then not found), Settle(err) fails them with err.
// Expectation.Also promises another file's blocks beside, settled on its
// own but wanted together.
// `p2pc run` promises the plugin and the inputs of a rerun this way and
// puts them only when a peer asks (internal/job, publish.go).
//
// # Manifest wire format
//
// A manifest is stored as a block of its own. Its canonical encoding is
//
//	"P2PM"            4 bytes of magic
//	0x01              format version
//	uvarint Size      file length in bytes, 0..MaxFileSize (64 GiB)
//	uvarint BlockSize 1..MaxBlockSize (16 MiB)
//	uvarint N         number of blocks, exactly ceil(Size/BlockSize)
//	N x 32 bytes      the SHA-256 of each block, in file order
//
// with uvarints as in encoding/binary, minimally encoded. Block i covers
// bytes [i*BlockSize, min((i+1)*BlockSize, Size)) of the file; only the
// last may be short. DecodeManifest accepts exactly what Encode produces:
// anything else (other magic or version, a non-minimal varint, an
// inconsistent count, trailing bytes, more than MaxManifestSize bytes) is
// an error wrapping ErrBadManifest, found before any allocation that the
// input's length does not pay for. A 64 GiB file in 1 MiB blocks has a
// 2 MiB manifest.
//
// # On-disk layout
//
// A DiskStore owns one directory:
//
//	dir/lock                    flock held while the store is open
//	dir/blocks/ab/abcdef...     a block, named by its full lower-case hex ID,
//	                            fanned out by its first byte (up to 256
//	                            directories, each made, and blocks/ fsynced,
//	                            before the first block named in it); mode
//	                            0444; mtime = last use
//	dir/blocks/ab/.tmp-<id>-<r> a block being written
//	dir/pins/<name>             a pin: "p2pc-pin v1\n" then one hex ID a line
//	dir/pins/.tmp-<name>-<r>    a pin being written
//	dir/quarantine/<id>.<ns>    a block that failed verification, moved aside
//	                            at <ns> Unix nanoseconds; pruned after 7 days
//	dir/quarantine/pin-<name>.<ns>  an unreadable pin file
//	dir/quarantine/file-<id>.<ns>   a whole file that failed verification
//	dir/files/<file id>         a whole file held in one piece (see below)
//	dir/files/.part-<file id>   a whole file being written; kept across a
//	                            crash for the next attempt to resume from
//
// A block file carries, in the extended attribute user.p2pc.crc32c, the
// CRC32C of its bytes (4 bytes, big-endian), recorded before the file is
// named; see "Verification on read". On a file system without user
// extended attributes there is none.
//
// # Crash consistency
//
// Following Preon's rule that state is written only after the data it
// describes: a block is written to a temporary file in its final
// directory, fsynced, renamed to its name, and the directory is fsynced
// before Put returns. A crash at any point therefore leaves no block or a
// complete one, never a partial file under a block's name; OpenDisk
// removes the temporary files a crash left behind. A full disk (ENOSPC)
// fails the Put with the error wrapped (errors.Is(err, syscall.ENOSPC)),
// its temporary file removed. Pin files are written the same way, and the
// in-memory pin set changes only once the file is durable. Every Get
// re-hashes the block, so a block damaged later (bit rot, a stray write)
// is quarantined and reported as ErrCorrupt rather than returned; Verify
// checks the whole store, for a node to run at start-up in the background.
//
// Batch makes many blocks durable in one pass instead of two fsyncs per
// block: Put writes each block to its temporary file (with direct I/O
// where the file system allows it and the length is a multiple of 4 KiB,
// so that the bytes go to the disk without a copy into the page cache;
// otherwise buffered, its write-back started at once), Commit fsyncs all
// of them concurrently (so that the file
// system commits its journal once for the lot), then renames each to its
// name, then fsyncs each directory that received a name, and only then
// returns. The rule, applied twice:
//
//   - a block's name is created only after its bytes are durable, so a
//     crash leaves complete blocks and temporary files, nothing between;
//   - whoever records state that describes a block of a batch (progress,
//     a block counted as fetched, a manifest taken as complete, an output
//     file renamed into place) does so only after Commit has returned, when
//     the names are durable too.
//
// Blocks written but not committed are lost in a crash; a fetch redoes at
// most one batch. PutFile and the fetcher of internal/transfer write
// through batches of 32 MiB.
//
// An ephemeral store (DiskOptions.Ephemeral: the folder of one `p2pc run`,
// removed when the run ends and swept when it died) skips the fsyncs of
// blocks and of their directories and writes through the page cache: no
// crash can need its blocks. Names are still created by rename after the
// bytes are written, so a reader never sees half a block.
//
// The tests kill real child processes with SIGKILL while they write blocks
// and pins, and while they put and commit batches, then check that every
// block the reopened store lists verifies, that every block whose Put or
// Commit had returned is there, and that no temporary file survives the
// reopen. That covers process crashes; power loss rests on the fsyncs.
//
// # Verification on read
//
// Get and Verify re-hash every block they read with SHA-256. ReadBlock,
// the read path of a block server, checks the CRC32C recorded with the
// block instead (a tenth of the cost, with the CPU instruction), and
// re-hashes with SHA-256 only when there is no CRC32C or it does not
// match, quarantining the block only if the SHA-256 fails too. What
// re-hashing on read is for is catching accidental damage on disk (bit
// rot, a stray write, a torn file) before the block is served; a CRC32C
// catches that, and still gets the block quarantined when read. A damaged
// block that slipped past the CRC32C (odds of 2^-32) would reach a peer
// that verifies the SHA-256 on receipt and refuses it: the cost of that
// case is a refused block and a banned server for one fetch, never a
// wrong block accepted. The CRC32C is computed from bytes that were just
// verified (or hashed by PutFile) and set on the temporary file before it
// is fsynced and named, so it is as crash-consistent as the block.
//
// # Whole files
//
// A DiskStore can also hold a file's blocks in one piece, files/<file ID>
// (the manifest staying a block file), instead of one block file each:
// that is how FetchFile (internal/transfer) writes a fetched file once
// rather than twice (block files, then the output). The file is assembled
// in files/.part-<file ID> (a Partial): each block goes to its offsets
// there as it arrives, verified on receipt, by direct I/O where the file
// system allows it. Install fsyncs it, renames it to files/<file ID> and
// fsyncs files/: from then on the store holds its blocks (Has, Get,
// ReadBlock, List, Verify, Usage, GC, pins all see them). LinkFile then
// makes the destination a hard link to it, created under a temporary name
// and renamed into place, its directory fsynced: the output is atomic as
// ExportFile's is, and written once.
//
// The partial file survives a crash. It is never trusted: the next
// OpenPartial of the same file hashes each block it holds (skipping
// holes) and only the blocks that match are taken as in place, so a fetch
// resumes where it stopped. OpenDisk removes partial files left for more
// than seven days, and GC removes the ones no fetch is using when it runs
// short of its target.
//
// The store and the destination share the bytes. The store reads them as
// it reads any block, hashing each one, so a change made through the
// destination (an edit in place) is caught: the whole file is moved to
// quarantine (the destination itself is left alone) and its blocks are no
// longer held. Removing or replacing the destination (an editor's rename,
// a new fetch) does not affect the store. A whole file is garbage as a
// unit: GC removes it, and its manifest with it, when no pin holds the
// file or any of its blocks; its mtime, shared with the destination, is
// not touched on read. Delete of one of its blocks rewrites the others as
// block files first. A whole file whose manifest is missing at open (it
// cannot be read without one) is removed, one whose length is wrong is
// quarantined.
//
// # Pins and garbage collection
//
// A pin is a named set of IDs that GC never removes: a job pins its
// manifest and block IDs (which need not be held yet) before fetching the
// Missing ones, and unpins them when it is done. Pins survive restarts.
// GC removes unpinned blocks least recently used first, by file mtime,
// which Get and Put refresh (at most once a minute per block). With
// DiskOptions.MaxBytes set, a Put that would exceed the cap first runs GC
// down to a sixteenth below the cap; pinned data beyond the cap is kept
// and logged, not refused — unless DiskOptions.Hard is set (p2pc join
// --disk): then a Put, a Batch's Put or an OpenPartial that still does
// not fit fails with a *FullError (ErrFull), and the partial files open
// count against the cap. A file put with PutFile into a capped store
// should be pinned right after: until then its blocks are merely the most
// recently used.
//
// # Block size
//
// Measured on this machine (2 vCPUs, virtio disk, Go 1.26, while other
// builds and benchmarks kept the load average at 15-20, so the spread is
// wide; best and median of 10 runs of 4 iterations each):
//
//	go test -run '^$' -bench 'PutFile|WriteFile' -benchtime 4x -count 5 ./internal/blocks/
//	go test -run '^$' -bench Overhead -count 5 ./internal/blocks/
//
//	64 MiB random file          256 KiB      1 MiB        4 MiB
//	blocks per file             256          64           16
//	PutFile, disk store  best   318 MB/s     506 MB/s     372 MB/s
//	                     median  99 MB/s     226 MB/s     276 MB/s
//	PutFile, mem store   median 382 MB/s     245 MB/s     431 MB/s
//	WriteFile, disk      median 455 MB/s     454 MB/s     430 MB/s
//
//	one disk Put of a 64-byte block (temp, fsync, rename, dir fsync):
//	3 ms when the disk is quiet, 45-65 ms behind other processes' writes
//
// The fixed cost of a durable Put dominates small blocks: 256 KiB blocks
// pay it four times as often as 1 MiB and are the slowest on disk by a
// wide margin. 1 MiB and 4 MiB are close (4 MiB gains a little when fsyncs
// queue, 1 MiB had the best run); reading back is block-size neutral. 1 MiB
// is the default because it keeps four times as many blocks per file as
// 4 MiB for a parallel fetch to spread over peers (Preon's reason for
// blocks: many slow uplinks add up), halves what a failed transfer
// re-sends, and bounds PutFile's memory to 5 MiB.
// Lock order: DiskStore.gcMu or pinMu (never both), then mu, then fanMu; expMu, Batch.mu and MemStore.mu are leaves.
package blocks
