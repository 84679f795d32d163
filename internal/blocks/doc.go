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
// # Files
//
// PutFile cuts a stream into blocks of a chosen size (DefaultBlockSize,
// 1 MiB, unless told otherwise), hashes and stores them with a bounded
// number of workers (at most 5 blocks in memory, whatever the file's
// length), then stores the manifest and returns its ID: the file ID.
// ReadManifest, Missing, WriteFile and ExportFile go the other way;
// ExportFile writes atomically (temporary file in the destination's
// directory, fsync, chmod, rename, fsync of the directory).
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
//	                            fanned out by its first byte (256 directories,
//	                            created at open); mode 0444; mtime = last use
//	dir/blocks/ab/.tmp-<id>-<r> a block being written
//	dir/pins/<name>             a pin: "p2pc-pin v1\n" then one hex ID a line
//	dir/pins/.tmp-<name>-<r>    a pin being written
//	dir/quarantine/<id>.<ns>    a block that failed verification, moved aside
//	                            at <ns> Unix nanoseconds; pruned after 7 days
//	dir/quarantine/pin-<name>.<ns>  an unreadable pin file
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
// The tests kill a real child process with SIGKILL while it writes blocks
// and pins, then check that every block the reopened store lists verifies
// and that every block whose Put had returned is there. That covers
// process crashes; power loss rests on the fsyncs.
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
// and logged, not refused. A file put with PutFile into a capped store
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
package blocks
