package blocks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Layout of a store directory; see docs/design/blocks.md.
const (
	blocksDir     = "blocks"
	quarantineDir = "quarantine"
	pinsDir       = "pins"
	lockName      = "lock"
	tmpPrefix     = ".tmp-"
)

// touchAfter is the granularity of the LRU clock: a block read or re-put
// gets its mtime set to now only if its mtime is older than this, so hot
// blocks do not cost a metadata write on every read.
const touchAfter = time.Minute

// DiskOptions configures OpenDisk.
type DiskOptions struct {
	// MaxBytes caps the bytes of blocks held. When a Put would exceed it,
	// the store first garbage-collects unpinned blocks, least recently
	// used first. Pinned blocks may push the store over the cap (it is
	// logged, not refused; see Hard). 0 means no cap.
	MaxBytes int64
	// Hard makes MaxBytes a hard cap: a Put, a Batch's Put or an
	// OpenPartial that would take the store over it even after the GC
	// fails with a *FullError (errors.Is ErrFull). p2pc join --disk.
	Hard bool
	// Logger receives warnings (quarantined blocks, cap overruns). nil
	// discards them.
	Logger *slog.Logger
	// Ephemeral is for a store thrown away with its process (the folder
	// of one `p2pc run`, removed when it ends and swept when it died):
	// blocks are written through the page cache and neither they nor
	// their directories are fsynced, since no crash can need them. Whole
	// files (Partial.Install, LinkFile) and pins stay durable.
	Ephemeral bool
}

// DiskStore is a crash-consistent Store in a directory. A block is written
// to a temporary file next to its final name, fsynced, renamed into place
// and its directory fsynced, so a crash at any point leaves either no block
// or a complete one; temporary files left by a crash are removed by
// OpenDisk. Every Get re-hashes the block; one that no longer matches its
// ID is moved to quarantine/ and reported as ErrCorrupt. Batch makes many
// blocks durable in one pass; a file can also be held in one piece (see
// Partial and docs/design/blocks.md, "Whole files").
//
// One process owns a store directory at a time (an flock on dir/lock).
type DiskStore struct {
	dir      string
	root     *os.Root
	lockf    *os.File
	log      *slog.Logger
	maxBytes int64
	hard     bool
	// ephemeral: DiskOptions.Ephemeral; syncs counts the fsyncs of blocks
	// and of the directories that hold them (tests).
	ephemeral bool
	syncs     atomic.Int64

	gcMu  sync.Mutex // one GC at a time; taken before mu
	pinMu sync.Mutex // serializes writes of pin files; taken before mu, never with gcMu

	mu        sync.Mutex // guards the fields below and every rename or removal in blocks/; taken before fanMu
	nblocks   int
	nbytes    int64
	pins      map[string]map[ID]struct{}
	pinned    map[ID]int // how many pins hold each ID
	gen       uint64     // bumped whenever something collectable may appear (unpinned Put, Unpin)
	exhausted bool       // the last GC removed every unpinned block it could ...
	exhaustAt uint64     // ... and gen was this when it started
	overLog   time.Time  // last "over the cap" warning
	reserved  int64      // bytes of the partial files open (OpenPartial), counted against the cap
	closed    bool
	closeOnce sync.Once

	objs  map[ID]*object  // whole files held in files/, by file ID; guarded by mu
	inObj map[ID]*object  // block ID -> a whole file that holds it; guarded by mu
	parts map[string]bool // partial files open; guarded by mu

	expMu    sync.Mutex          // guards expected; a leaf
	expected map[ID]*Expectation // blocks promised but maybe not held yet (Expect)
	settles  atomic.Uint64       // Settle calls so far: a read that missed looks again if one came meanwhile

	noXattr  atomic.Bool // the file system refused a user extended attribute: record no CRC32C
	noDirect atomic.Bool // the file system refused direct I/O: write blocks through the page cache

	// fan[b] is blocks/<b> opened as a root, once it exists: Has looks a
	// block up there with one fstatat instead of resolving blocks/ab/<id>
	// from the store's root (five system calls), which was most of the
	// time to plan a fetch of a large file. Guarded by fanMu.
	fanMu sync.Mutex // a leaf
	fan   [256]*os.Root
	// made[b]: blocks/<b> exists (created at first use). Guarded by fanMu.
	made [256]bool
}

var (
	_ ownStore       = (*DiskStore)(nil)
	_ VerifiedPutter = (*DiskStore)(nil)
	_ BlockReader    = (*DiskStore)(nil)
)

// OpenDisk opens (creating if needed) the store in dir, takes its lock,
// removes temporary files a crash left behind, loads the pins and counts
// the blocks held. It does not re-hash the blocks: Get does that on every
// read, and Verify checks them all.
func OpenDisk(dir string, opts DiskOptions) (*DiskStore, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("open store %s: negative MaxBytes %d", dir, opts.MaxBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d := &DiskStore{
		dir:       dir,
		root:      root,
		log:       log.With("component", "blocks", "dir", dir),
		maxBytes:  opts.MaxBytes,
		hard:      opts.Hard,
		ephemeral: opts.Ephemeral,
		pins:      make(map[string]map[ID]struct{}),
		pinned:    make(map[ID]int),
		objs:      make(map[ID]*object),
		inObj:     make(map[ID]*object),
		parts:     make(map[string]bool),
	}
	if err := d.open(); err != nil {
		d.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return d, nil
}

func (d *DiskStore) open() error {
	lf, err := d.root.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	d.lockf = lf
	if err := lockFile(lf); err != nil {
		return err
	}
	for _, name := range []string{blocksDir, quarantineDir, pinsDir, filesDir} {
		if err := mkdirExist(d.root, name); err != nil {
			return err
		}
	}
	// Make the directories themselves durable before any block relies on
	// them. The 256 fan-out directories are made when a block first needs
	// one (fanoutDir): a store used for whole files needs few of them, and
	// making 256 directories takes tens of milliseconds on a file system
	// that has just freed many inodes.
	for _, name := range []string{blocksDir, "."} {
		if err := d.syncBlockDir(name); err != nil {
			return err
		}
	}
	removed := 0
	for i := range 256 {
		dirName := fanout(byte(i))
		ents, err := readDir(d.root, dirName)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		d.made[i] = true
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, tmpPrefix) {
				if err := d.root.Remove(dirName + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("remove stale temp file: %w", err)
				}
				removed++
				continue
			}
			if _, ok := parseBlockName(byte(i), name); !ok || !e.Type().IsRegular() {
				d.log.Warn("ignoring unexpected file in store", "path", dirName+"/"+name)
				continue
			}
			fi, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			d.nblocks++
			d.nbytes += fi.Size()
		}
	}
	d.pruneQuarantine()
	n, err := d.loadPins()
	if err != nil {
		return err
	}
	removed += n
	n, err = d.loadObjects()
	if err != nil {
		return err
	}
	removed += n
	if removed > 0 {
		d.log.Info("removed temporary files left by a crash", "count", removed)
	}
	return nil
}

// Dir returns the store's directory.
func (d *DiskStore) Dir() string { return d.dir }

// Close releases the store's lock. The store must not be used afterwards.
func (d *DiskStore) Close() error {
	var err error
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		d.mu.Unlock()
		if d.lockf != nil {
			err = errors.Join(unlockFile(d.lockf), d.lockf.Close())
		}
		d.fanMu.Lock()
		for i, r := range d.fan {
			if r != nil {
				err = errors.Join(err, r.Close())
				d.fan[i] = nil
			}
		}
		d.fanMu.Unlock()
		err = errors.Join(err, d.root.Close())
	})
	return err
}

// fanoutDir returns the name of the fan-out directory of a block whose ID
// starts with b, creating it (made durable, with blocks/ fsynced, before
// any block is named in it) if it does not exist yet.
func (d *DiskStore) fanoutDir(b byte) (string, error) {
	name := fanout(b)
	d.fanMu.Lock()
	defer d.fanMu.Unlock()
	if d.made[b] {
		return name, nil
	}
	if err := mkdirExist(d.root, name); err != nil {
		return "", fmt.Errorf("make %s: %w", name, err)
	}
	if err := d.syncBlockDir(blocksDir); err != nil {
		return "", fmt.Errorf("fsync %s: %w", blocksDir, err)
	}
	d.made[b] = true
	return name, nil
}

// fanRoot returns blocks/<b> as a root, opened on first use, or an error
// satisfying errors.Is(err, fs.ErrNotExist) if it does not exist yet.
func (d *DiskStore) fanRoot(b byte) (*os.Root, error) {
	d.fanMu.Lock()
	defer d.fanMu.Unlock()
	if r := d.fan[b]; r != nil {
		return r, nil
	}
	if !d.made[b] {
		return nil, fs.ErrNotExist
	}
	r, err := d.root.OpenRoot(fanout(b))
	if err != nil {
		return nil, err
	}
	d.fan[b] = r
	return r, nil
}

// Has reports whether the store holds id.
func (d *DiskStore) Has(ctx context.Context, id ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("has block %s: %w", id.Short(), err)
	}
	if d.objectOf(id) != nil {
		return true, nil
	}
	fr, err := d.fanRoot(id[0])
	if errors.Is(err, fs.ErrNotExist) {
		return d.expecting(id) != nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("has block %s: %w", id.Short(), err)
	}
	fi, err := fr.Lstat(id.String())
	if errors.Is(err, fs.ErrNotExist) {
		return d.expecting(id) != nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("has block %s: %w", id.Short(), err)
	}
	return fi.Mode().IsRegular(), nil
}

// Get reads id, verifies it and marks it recently used. A block whose
// bytes no longer hash to id is moved to quarantine/ and Get returns an
// error wrapping ErrCorrupt.
func (d *DiskStore) Get(ctx context.Context, id ID) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get block %s: %w", id.Short(), err)
	}
	settles := d.settles.Load()
	data, err := d.readAny(id, nil, checkSHA)
	if errors.Is(err, ErrNotFound) {
		if retry, werr := d.awaitExpected(ctx, id, settles); werr != nil {
			err = werr
		} else if retry {
			data, err = d.readAny(id, nil, checkSHA)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get block %s: %w", id.Short(), err)
	}
	return data, nil
}

// ReadBlock reads id into buf (reallocated if too small; the result
// aliases buf when it fits) and checks it against the CRC32C recorded
// when the block was written, falling back to SHA-256 against id for a
// block that has none (written by an older version, or on a file system
// without user extended attributes). A block that fails the CRC32C is
// re-hashed before anything is decided: it is quarantined and reported as
// ErrCorrupt only if its SHA-256 does not match id either.
//
// This is the read path of a block server, which sends what it reads to a
// peer that verifies the SHA-256 on receipt. The CRC32C catches what
// re-hashing on read is there to catch, accidental damage on disk (bit
// rot, a stray write, a torn file): such a block is still quarantined when
// read instead of served. A corruption that slipped past a 32-bit CRC
// (odds 2^-32 per damaged block) would be caught by the receiver's
// SHA-256, which rejects the block: the cost of that case is a refused
// block, never a wrong one. Get and Verify always re-hash with SHA-256.
func (d *DiskStore) ReadBlock(ctx context.Context, id ID, buf []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read block %s: %w", id.Short(), err)
	}
	settles := d.settles.Load()
	data, err := d.readAny(id, buf, checkCRC)
	if errors.Is(err, ErrNotFound) {
		if retry, werr := d.awaitExpected(ctx, id, settles); werr != nil {
			err = werr
		} else if retry {
			data, err = d.readAny(id, buf, checkCRC)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read block %s: %w", id.Short(), err)
	}
	return data, nil
}

// How read checks a block.
const (
	checkSHA   = iota // re-hash and compare with the ID (Get)
	checkCRC          // compare with the recorded CRC32C, else as checkSHA (ReadBlock)
	checkScrub        // re-hash without keeping the bytes (Verify)
)

// readAny reads id from its own file, else from the whole file that
// holds it (an object).
func (d *DiskStore) readAny(id ID, buf []byte, mode int) ([]byte, error) {
	data, err := d.read(id, buf, mode)
	if errors.Is(err, ErrNotFound) {
		data, err = d.readObject(id, buf)
	}
	return data, err
}

// read opens id, reads it into buf (grown if needed; with checkScrub it
// only hashes it), checks it as mode says and marks it recently used. A
// block that fails is quarantined and reported as ErrCorrupt.
func (d *DiskStore) read(id ID, buf []byte, mode int) ([]byte, error) {
	p := blockPath(id)
	f, err := d.root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > MaxBlockSize {
		d.quarantine(id, fi, fmt.Sprintf("%d bytes, larger than MaxBlockSize", fi.Size()))
		return nil, fmt.Errorf("%d bytes on disk: %w", fi.Size(), ErrCorrupt)
	}
	var data []byte
	if mode == checkScrub {
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(f, MaxBlockSize+1)); err != nil {
			return nil, err
		}
		if got := ID(h.Sum(nil)); got != id {
			d.quarantine(id, fi, "content hashes to "+got.Short())
			return nil, fmt.Errorf("content hashes to %s: %w", got.Short(), ErrCorrupt)
		}
		return nil, nil
	}
	// Read one byte more than stat promised, to notice a file that grew.
	if n := int(fi.Size()) + 1; cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:fi.Size()+1]
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	data = buf[:n]
	ok := false
	if mode == checkCRC {
		if sum, has := getCRC(f); has {
			ok = crc32.Checksum(data, castagnoli) == sum
			if !ok {
				d.log.Warn("block fails its CRC32C; re-hashing it", "id", id)
			}
		}
	}
	if !ok {
		if got := Sum(data); got != id {
			d.quarantine(id, fi, "content hashes to "+got.Short())
			return nil, fmt.Errorf("content hashes to %s: %w", got.Short(), ErrCorrupt)
		}
	}
	d.touch(p, fi)
	return data, nil
}

// touch marks a block as recently used for the LRU garbage collector.
func (d *DiskStore) touch(p string, fi fs.FileInfo) {
	now := time.Now()
	if now.Sub(fi.ModTime()) < touchAfter {
		return
	}
	if err := d.root.Chtimes(p, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Debug("touch block", "path", p, "err", err)
	}
}

// held reports whether the store holds id, in a block file (marked
// recently used) or a whole file: a Put of a block already held writes
// nothing.
func (d *DiskStore) held(id ID) bool {
	return d.objectOf(id) != nil || d.hasBlockFile(id)
}

// hasBlockFile reports whether id's block file exists, marking it
// recently used if so.
func (d *DiskStore) hasBlockFile(id ID) bool {
	p := blockPath(id)
	fi, err := d.root.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	d.touch(p, fi)
	return true
}

// Delete removes id.
func (d *DiskStore) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete block %s: %w", id.Short(), err)
	}
	d.mu.Lock()
	err := d.removeLocked(id, nil)
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delete block %s: %w", id.Short(), err)
	}
	// A block held in whole files: keep their other blocks, as block files.
	for o := d.objectOf(id); o != nil; o = d.objectOf(id) {
		if err := d.explode(ctx, o, id); err != nil {
			return fmt.Errorf("delete block %s: %w", id.Short(), err)
		}
	}
	return nil
}

// removeLocked removes the block file of id, if it is still the file
// described by want (any file if want is nil). d.mu must be held.
func (d *DiskStore) removeLocked(id ID, want fs.FileInfo) error {
	p := blockPath(id)
	fi, err := d.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if want != nil && (!os.SameFile(fi, want) || !fi.ModTime().Equal(want.ModTime())) {
		return errChanged
	}
	if err := d.root.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	d.nblocks--
	d.nbytes -= fi.Size()
	return nil
}

var errChanged = errors.New("block changed since it was listed")

// List calls fn for every block held, block files first, then the blocks
// held only in whole files. fn may call other methods of d.
func (d *DiskStore) List(ctx context.Context, fn func(id ID, size int64) error) error {
	err := d.list(ctx, func(id ID, fi fs.FileInfo) error { return fn(id, fi.Size()) })
	if err != nil {
		return err
	}
	type entry struct {
		id   ID
		size int64
	}
	var rest []entry
	d.mu.Lock()
	for id, o := range d.inObj {
		rest = append(rest, entry{id, int64(o.m.BlockLen(o.first[id]))})
	}
	d.mu.Unlock()
	for _, e := range rest {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list blocks: %w", err)
		}
		if fi, err := d.root.Lstat(blockPath(e.id)); err == nil && fi.Mode().IsRegular() {
			continue // listed already
		}
		if err := fn(e.id, e.size); err != nil {
			return err
		}
	}
	return nil
}

func (d *DiskStore) list(ctx context.Context, fn func(id ID, fi fs.FileInfo) error) error {
	for i := range 256 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list blocks: %w", err)
		}
		dirName := fanout(byte(i))
		ents, err := readDir(d.root, dirName)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not made yet: no block starts with i
		}
		if err != nil {
			return fmt.Errorf("list blocks: %w", err)
		}
		for _, e := range ents {
			id, ok := parseBlockName(byte(i), e.Name())
			if !ok || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			if err != nil {
				return fmt.Errorf("list blocks: %w", err)
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("list blocks: %w", err)
			}
			if err := fn(id, fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// Usage returns how many blocks the store holds and their total length:
// block files, plus the distinct blocks of each whole file and its length
// (a block held both ways counts twice, as it takes the space twice).
func (d *DiskStore) Usage() (blocks int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nblocks, d.nbytes
}

// blockPath returns the store-relative path of id: blocks/ab/abcdef....
func blockPath(id ID) string {
	s := id.String()
	return blocksDir + "/" + s[:2] + "/" + s
}

func fanout(b byte) string {
	return blocksDir + "/" + hex.EncodeToString([]byte{b})
}

// parseBlockName accepts only the canonical lower-case name of a block in
// the fan-out directory of its first byte.
func parseBlockName(first byte, name string) (ID, bool) {
	if len(name) != 2*IDSize {
		return ID{}, false
	}
	id, err := ParseID(name)
	if err != nil || id[0] != first || id.String() != name {
		return ID{}, false
	}
	return id, true
}

func mkdirExist(root *os.Root, name string) error {
	err := root.Mkdir(name, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

func readDir(root *os.Root, name string) ([]fs.DirEntry, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
