package blocks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Layout of a store directory; see the package documentation.
const (
	blocksDir     = "blocks"
	quarantineDir = "quarantine"
	pinsDir       = "pins"
	lockName      = "lock"
	tmpPrefix     = ".tmp-"
)

// quarantineKeep is how long OpenDisk keeps quarantined files, evidence
// of a failing disk, before removing them.
const quarantineKeep = 7 * 24 * time.Hour

// touchAfter is the granularity of the LRU clock: a block read or re-put
// gets its mtime set to now only if its mtime is older than this, so hot
// blocks do not cost a metadata write on every read.
const touchAfter = time.Minute

// DiskOptions configures OpenDisk.
type DiskOptions struct {
	// MaxBytes caps the bytes of blocks held. When a Put would exceed it,
	// the store first garbage-collects unpinned blocks, least recently
	// used first. Pinned blocks may push the store over the cap (it is
	// logged, not refused). 0 means no cap.
	MaxBytes int64
	// Logger receives warnings (quarantined blocks, cap overruns). nil
	// discards them.
	Logger *slog.Logger
}

// DiskStore is a crash-consistent Store in a directory. A block is written
// to a temporary file next to its final name, fsynced, renamed into place
// and its directory fsynced, so a crash at any point leaves either no block
// or a complete one; temporary files left by a crash are removed by
// OpenDisk. Every Get re-hashes the block; one that no longer matches its
// ID is moved to quarantine/ and reported as ErrCorrupt.
//
// One process owns a store directory at a time (an flock on dir/lock).
type DiskStore struct {
	dir      string
	root     *os.Root
	lockf    *os.File
	log      *slog.Logger
	maxBytes int64

	gcMu  sync.Mutex // one GC at a time
	pinMu sync.Mutex // serializes writes of pin files

	mu        sync.Mutex // guards the fields below and every rename or removal in blocks/
	nblocks   int
	nbytes    int64
	pins      map[string]map[ID]struct{}
	pinned    map[ID]int // how many pins hold each ID
	gen       uint64     // bumped whenever something collectable may appear (unpinned Put, Unpin)
	exhausted bool       // the last GC removed every unpinned block it could ...
	exhaustAt uint64     // ... and gen was this when it started
	overLog   time.Time  // last "over the cap" warning
	closed    bool
	closeOnce sync.Once
}

var _ ownStore = (*DiskStore)(nil)

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
		dir:      dir,
		root:     root,
		log:      log.With("component", "blocks", "dir", dir),
		maxBytes: opts.MaxBytes,
		pins:     make(map[string]map[ID]struct{}),
		pinned:   make(map[ID]int),
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
	for _, name := range []string{blocksDir, quarantineDir, pinsDir} {
		if err := mkdirExist(d.root, name); err != nil {
			return err
		}
	}
	for i := range 256 {
		if err := mkdirExist(d.root, fanout(byte(i))); err != nil {
			return err
		}
	}
	// Make the directories themselves durable before any block relies on them.
	for _, name := range []string{blocksDir, "."} {
		if err := syncDir(d.root, name); err != nil {
			return err
		}
	}
	removed := 0
	for i := range 256 {
		dirName := fanout(byte(i))
		ents, err := readDir(d.root, dirName)
		if err != nil {
			return err
		}
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
	if removed > 0 {
		d.log.Info("removed temporary files left by a crash", "count", removed)
	}
	return nil
}

// pruneQuarantine removes quarantined files older than quarantineKeep,
// judged by the time stamp in their names (<name>.<unix-nanoseconds>).
func (d *DiskStore) pruneQuarantine() {
	ents, err := readDir(d.root, quarantineDir)
	if err != nil {
		d.log.Warn("cannot read quarantine", "err", err)
		return
	}
	for _, e := range ents {
		name := e.Name()
		dot := strings.LastIndexByte(name, '.')
		nanos, err := strconv.ParseInt(name[dot+1:], 10, 64)
		if dot < 0 || err != nil || time.Since(time.Unix(0, nanos)) < quarantineKeep {
			continue
		}
		if err := d.root.Remove(quarantineDir + "/" + name); err != nil {
			d.log.Warn("cannot prune quarantine", "file", name, "err", err)
		}
	}
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
		err = errors.Join(err, d.root.Close())
	})
	return err
}

// Has reports whether the store holds id.
func (d *DiskStore) Has(ctx context.Context, id ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("has block %s: %w", id.Short(), err)
	}
	fi, err := d.root.Lstat(blockPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
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
	data, fi, err := d.read(id, true)
	if err != nil {
		return nil, fmt.Errorf("get block %s: %w", id.Short(), err)
	}
	d.touch(blockPath(id), fi)
	return data, nil
}

// read opens, reads (if keep; otherwise only hashes) and verifies id,
// quarantining it on a mismatch.
func (d *DiskStore) read(id ID, keep bool) ([]byte, fs.FileInfo, error) {
	p := blockPath(id)
	f, err := d.root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > MaxBlockSize {
		d.quarantine(id, fi, fmt.Sprintf("%d bytes, larger than MaxBlockSize", fi.Size()))
		return nil, nil, fmt.Errorf("%d bytes on disk: %w", fi.Size(), ErrCorrupt)
	}
	h := sha256.New()
	var data []byte
	if keep {
		// Read one byte more than stat promised, to notice a file that grew.
		data = make([]byte, fi.Size()+1)
		n, err := io.ReadFull(f, data)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		data = data[:n]
		h.Write(data)
	} else if _, err := io.Copy(h, io.LimitReader(f, MaxBlockSize+1)); err != nil {
		return nil, nil, err
	}
	if got := ID(h.Sum(nil)); got != id {
		d.quarantine(id, fi, "content hashes to "+got.Short())
		return nil, nil, fmt.Errorf("content hashes to %s: %w", got.Short(), ErrCorrupt)
	}
	return data, fi, nil
}

// quarantine moves the block file described by fi out of blocks/, unless
// it has been replaced (by a Put of good bytes) since fi was taken.
func (d *DiskStore) quarantine(id ID, fi fs.FileInfo, reason string) {
	p := blockPath(id)
	q := fmt.Sprintf("%s/%s.%d", quarantineDir, id, time.Now().UnixNano())
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, err := d.root.Lstat(p)
	if err != nil || !os.SameFile(cur, fi) {
		return
	}
	if err := d.root.Rename(p, q); err != nil {
		d.log.Error("cannot quarantine corrupt block; removing it", "id", id, "err", err)
		if err := d.root.Remove(p); err != nil {
			d.log.Error("cannot remove corrupt block", "id", id, "err", err)
			return
		}
	} else {
		d.log.Warn("corrupt block quarantined", "id", id, "reason", reason, "path", q)
	}
	d.nblocks--
	d.nbytes -= fi.Size()
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

// Put stores data under id: temp file, fsync, rename, fsync directory. A
// block already held is only marked as recently used. If the store has a
// cap and data would exceed it, unpinned blocks are collected first.
func (d *DiskStore) Put(ctx context.Context, id ID, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if err := CheckBlock(id, data); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return d.putHashed(ctx, id, data)
}

// putHashed is Put without re-hashing data: the caller has just computed
// id from it.
func (d *DiskStore) putHashed(ctx context.Context, id ID, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if len(data) > MaxBlockSize {
		return fmt.Errorf("put block %s: %d bytes: %w", id.Short(), len(data), ErrTooLarge)
	}
	p := blockPath(id)
	if fi, err := d.root.Lstat(p); err == nil && fi.Mode().IsRegular() {
		d.touch(p, fi)
		return nil
	}
	if err := d.makeRoom(ctx, int64(len(data))); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if err := d.writeBlock(id, data); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	return nil
}

func (d *DiskStore) writeBlock(id ID, data []byte) (err error) {
	p := blockPath(id)
	dir := fanout(id[0])
	tmp, f, err := createTemp(d.root, dir, id.String())
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			if rerr := d.root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				d.log.Error("cannot remove temp file", "path", tmp, "err", rerr)
			}
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("store closed")
	}
	if fi, lerr := d.root.Lstat(p); lerr == nil && fi.Mode().IsRegular() {
		// A concurrent Put of the same block won the race.
		d.mu.Unlock()
		if rerr := d.root.Remove(tmp); rerr != nil {
			d.log.Error("cannot remove temp file", "path", tmp, "err", rerr)
		}
		return nil
	}
	if err := d.root.Rename(tmp, p); err != nil {
		d.mu.Unlock()
		return fmt.Errorf("rename: %w", err)
	}
	d.nblocks++
	d.nbytes += int64(len(data))
	if d.pinned[id] == 0 {
		d.gen++
	}
	d.mu.Unlock()
	// The rename is only durable once the directory is.
	if err := syncDir(d.root, dir); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

// Delete removes id.
func (d *DiskStore) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete block %s: %w", id.Short(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.removeLocked(id, nil); err != nil {
		return fmt.Errorf("delete block %s: %w", id.Short(), err)
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

// List calls fn for every block held. fn may call other methods of d.
func (d *DiskStore) List(ctx context.Context, fn func(id ID, size int64) error) error {
	return d.list(ctx, func(id ID, fi fs.FileInfo) error { return fn(id, fi.Size()) })
}

func (d *DiskStore) list(ctx context.Context, fn func(id ID, fi fs.FileInfo) error) error {
	for i := range 256 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list blocks: %w", err)
		}
		dirName := fanout(byte(i))
		ents, err := readDir(d.root, dirName)
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

// Usage returns how many blocks the store holds and their total length.
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

// createTemp creates dir/.tmp-<stem>-<random> exclusively.
func createTemp(root *os.Root, dir, stem string) (string, *os.File, error) {
	for range 10 {
		var r [8]byte
		rand.Read(r[:])
		name := dir + "/" + tmpPrefix + stem + "-" + hex.EncodeToString(r[:])
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, errors.New("cannot find an unused temp file name")
}

func mkdirExist(root *os.Root, name string) error {
	err := root.Mkdir(name, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

func syncDir(root *os.Root, name string) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

func readDir(root *os.Root, name string) ([]fs.DirEntry, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
