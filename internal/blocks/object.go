package blocks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Whole-file objects. A DiskStore may hold the blocks of a file in one
// piece, files/<file ID>, instead of one block file each: that is how
// FetchFile (internal/transfer) writes a fetched file once, hard-linked to
// its destination, instead of twice (block files, then the output). The
// file's manifest is a block file as always; the object's blocks are at
// the manifest's offsets. See docs/design/blocks.md, "Whole files".
const (
	filesDir   = "files"
	partPrefix = ".part-"
)

// object is a whole file held in one piece.
type object struct {
	id    ID // the file ID: its manifest's block ID
	m     *Manifest
	first map[ID]int // each distinct block, at its first position
}

func objectPath(file ID) string { return filesDir + "/" + file.String() }

// loadObjects indexes files/ at open: whole files whose manifest is held
// and whose length matches it. An object without its manifest cannot be
// read and is removed; one of the wrong length (changed through its other
// link) is quarantined. It removes temporary files and partial files
// older than quarantineKeep, and returns how many temporary files it
// removed.
func (d *DiskStore) loadObjects() (int, error) {
	ents, err := readDir(d.root, filesDir)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range ents {
		name := e.Name()
		p := filesDir + "/" + name
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("remove stale temp file: %w", err)
			}
			removed++
			continue
		case strings.HasPrefix(name, partPrefix):
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > quarantineKeep {
				d.log.Info("removing an abandoned partial file", "path", p)
				if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					d.log.Warn("cannot remove partial file", "path", p, "err", err)
				}
			}
			continue
		}
		id, err := ParseID(name)
		if err != nil || id.String() != name || !e.Type().IsRegular() {
			d.log.Warn("ignoring unexpected file in store", "path", p)
			continue
		}
		mdata, err := d.read(id, nil, checkSHA)
		var m *Manifest
		if err == nil {
			m, err = DecodeManifest(mdata)
		}
		if err != nil {
			d.log.Warn("whole file without a readable manifest; removing it", "file", id, "err", err)
			if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, err
			}
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return removed, err
		}
		if fi.Size() != m.Size {
			d.quarantineFile(id, fi, fmt.Sprintf("%d bytes, manifest says %d", fi.Size(), m.Size))
			continue
		}
		d.addObjectLocked(newObject(id, m))
	}
	return removed, nil
}

func newObject(file ID, m *Manifest) *object {
	o := &object{id: file, m: m, first: make(map[ID]int, len(m.Blocks))}
	for i, id := range m.Blocks {
		if _, ok := o.first[id]; !ok {
			o.first[id] = i
		}
	}
	return o
}

// addObjectLocked indexes o, replacing an object of the same file. d.mu
// must be held (or the store not yet shared).
func (d *DiskStore) addObjectLocked(o *object) {
	if old := d.objs[o.id]; old != nil {
		d.removeObjectLocked(old)
	}
	d.objs[o.id] = o
	for id := range o.first {
		if _, ok := d.inObj[id]; !ok {
			d.inObj[id] = o
		}
	}
	d.nblocks += len(o.first)
	d.nbytes += o.m.Size
	d.gen++
}

// removeObjectLocked forgets o (its file is already gone or moved). d.mu
// must be held.
func (d *DiskStore) removeObjectLocked(o *object) {
	if d.objs[o.id] != o {
		return
	}
	delete(d.objs, o.id)
	for id := range o.first {
		if d.inObj[id] != o {
			continue
		}
		delete(d.inObj, id)
		for _, other := range d.objs { // another whole file may hold it too
			if _, ok := other.first[id]; ok {
				d.inObj[id] = other
				break
			}
		}
	}
	d.nblocks -= len(o.first)
	d.nbytes -= o.m.Size
}

// objectOf returns a whole file holding block id, if any.
func (d *DiskStore) objectOf(id ID) *object {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inObj[id]
}

// readObject reads block id from the whole file that holds it into buf
// (grown if needed) and verifies it with SHA-256. A whole file holding a
// block that fails is quarantined: it may have been changed through its
// other link, the FetchFile destination.
func (d *DiskStore) readObject(id ID, buf []byte) ([]byte, error) {
	o := d.objectOf(id)
	if o == nil {
		return nil, ErrNotFound
	}
	return d.readObjectBlock(o, id, o.first[id], buf)
}

func (d *DiskStore) readObjectBlock(o *object, id ID, i int, buf []byte) ([]byte, error) {
	p := objectPath(o.id)
	f, err := d.root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		d.mu.Lock()
		d.removeObjectLocked(o)
		d.mu.Unlock()
		d.log.Warn("whole file vanished from the store", "file", o.id)
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
	n := o.m.BlockLen(i)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := f.ReadAt(buf, o.m.Offset(i)); err != nil {
		if errors.Is(err, io.EOF) {
			d.quarantineFile(o.id, fi, fmt.Sprintf("block %d (%s) cut short", i, id.Short()))
			return nil, fmt.Errorf("whole file %s cut short: %w", o.id.Short(), ErrCorrupt)
		}
		return nil, err
	}
	if got := Sum(buf); got != id {
		d.quarantineFile(o.id, fi, fmt.Sprintf("block %d (%s) hashes to %s", i, id.Short(), got.Short()))
		return nil, fmt.Errorf("block in whole file %s hashes to %s: %w", o.id.Short(), got.Short(), ErrCorrupt)
	}
	return buf, nil
}

// removeObject deletes the whole file o from disk and the index, if it is
// still the file described by want (any file if want is nil). d.mu must
// be held.
func (d *DiskStore) removeObjectFileLocked(o *object, want fs.FileInfo) error {
	p := objectPath(o.id)
	fi, err := d.root.Lstat(p)
	if err == nil && want != nil && (!os.SameFile(fi, want) || !fi.ModTime().Equal(want.ModTime())) {
		return errChanged
	}
	if err == nil {
		if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	d.removeObjectLocked(o)
	return nil
}

// explode turns the whole file o into block files for every block it holds
// except skip, then removes it: what Delete does to a block held only in
// a whole file. A block that fails verification ends it (o is then
// quarantined).
func (d *DiskStore) explode(ctx context.Context, o *object, skip ID) error {
	b := d.NewBatch()
	for id, i := range o.first {
		if id == skip || d.hasBlockFile(id) {
			continue
		}
		data, err := d.readObjectBlock(o, id, i, nil)
		if err != nil {
			b.Abort()
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
				return nil // o is gone
			}
			return err
		}
		if err := b.put(ctx, trusted(id, data), d.hasBlockFile); err != nil {
			b.Abort()
			return err
		}
	}
	if _, err := b.Commit(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.removeObjectFileLocked(o, nil); err != nil {
		return err
	}
	return syncDir(d.root, filesDir)
}

// HasFile reports whether the store holds the file named by file in one
// piece (as FetchFile leaves it).
func (d *DiskStore) HasFile(file ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.objs[file] != nil
}

// Partial is a file being written in one piece into a DiskStore, to become
// a whole file of the store (Install) hard-linked to a destination
// (LinkFile). It lives in files/.part-<file ID> and survives a crash: the
// next OpenPartial of the same file finds it and verifies, block by block
// against the manifest, what it already holds (InPlace), so that a fetch
// resumes where it stopped. Nothing about a partial file is trusted
// before that check.
type Partial struct {
	d    *DiskStore
	file ID
	m    *Manifest
	name string // store-relative
	f    *os.File
	ok   []bool // ok[i]: block i verified in place at open

	// dio, when not nil, is the file opened again for direct I/O (on a
	// device-backed file system): WriteAt sends aligned blocks through
	// it, from memory straight to the disk, without the copy into the
	// page cache and the write-back that would follow; the fsync of
	// Install then has little left to do.
	dio    *os.File
	dioOff atomic.Bool // direct I/O refused at some point: stop trying
}

// OpenPartial opens (creating if needed) the partial file of file, whose
// manifest is m, sized to m.Size, and verifies the blocks it already
// holds. Only one Partial per file is resumable at a time: a second
// concurrent OpenPartial of the same file gets a fresh one.
func (d *DiskStore) OpenPartial(ctx context.Context, file ID, m *Manifest) (*Partial, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("partial %s: %w", file.Short(), err)
	}
	if err := d.makeRoom(ctx, m.Size); err != nil {
		return nil, fmt.Errorf("partial %s: %w", file.Short(), err)
	}
	name := filesDir + "/" + partPrefix + file.String()
	d.mu.Lock()
	d.reserved += m.Size
	if d.parts[name] {
		var r [8]byte
		rand.Read(r[:])
		name += "-" + hex.EncodeToString(r[:])
	}
	d.parts[name] = true
	d.mu.Unlock()
	p := &Partial{d: d, file: file, m: m, name: name, ok: make([]bool, len(m.Blocks))}
	f, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		p.release()
		return nil, fmt.Errorf("partial %s: %w", file.Short(), err)
	}
	p.f = f
	if err := p.scan(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("partial %s: %w", file.Short(), err)
	}
	if p.dio = openDirect(d.root, filepath.Join(d.dir, filesDir), name); p.dio != nil && !preallocate(f, m.Size) {
		p.dio.Close() // direct writes into holes would be slow, or refused
		p.dio = nil
	}
	if err := f.Truncate(m.Size); err != nil {
		p.Close()
		return nil, fmt.Errorf("partial %s: %w", file.Short(), err)
	}
	return p, nil
}

// WriteAt writes data at off in the partial file, like File().WriteAt. It
// is safe for concurrent use on distinct ranges. Writes aligned for direct
// I/O go to the disk without the page cache when the file system allows
// it; the others are buffered, their write-back started at once.
func (p *Partial) WriteAt(data []byte, off int64) error {
	if p.dio != nil && !p.dioOff.Load() && len(data) > 0 && off%dioAlign == 0 && len(data)%dioAlign == 0 {
		buf, bp := alignedCopy(data)
		_, err := p.dio.WriteAt(buf, off)
		putAligned(bp)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		p.dioOff.Store(true)
		p.d.log.Info("direct I/O refused; writing through the page cache", "err", err)
	}
	if _, err := p.f.WriteAt(data, off); err != nil {
		return err
	}
	StartWriteback(p.f, off, int64(len(data)))
	return nil
}

// Aligned buffers for direct I/O of blocks up to DefaultBlockSize.
var alignedPool = sync.Pool{New: func() any {
	b := make([]byte, DefaultBlockSize+dioAlign)
	off := (dioAlign - int(uintptr(unsafe.Pointer(&b[0]))%dioAlign)) % dioAlign
	b = b[off : off+DefaultBlockSize]
	return &b
}}

func getAligned(n int) *[]byte {
	if n > DefaultBlockSize {
		b := make([]byte, n+dioAlign)
		off := (dioAlign - int(uintptr(unsafe.Pointer(&b[0]))%dioAlign)) % dioAlign
		b = b[off : off+n]
		return &b
	}
	return alignedPool.Get().(*[]byte)
}

// alignedCopy returns data itself if it starts on a dioAlign boundary,
// else a copy in a pooled aligned buffer bp (to give back with putAligned;
// nil when data is returned as is).
func alignedCopy(data []byte) (buf []byte, bp *[]byte) {
	if uintptr(unsafe.Pointer(&data[0]))%dioAlign == 0 {
		return data, nil
	}
	bp = getAligned(len(data))
	buf = (*bp)[:len(data)]
	copy(buf, data)
	return buf, bp
}

func putAligned(bp *[]byte) {
	if bp != nil && cap(*bp) == DefaultBlockSize {
		alignedPool.Put(bp)
	}
}

// scan verifies the blocks a partial file left by an earlier attempt
// holds, skipping holes (never written).
func (p *Partial) scan(ctx context.Context) error {
	fi, err := p.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	found := 0
	var buf []byte
	for i, id := range p.m.Blocks {
		off, n := p.m.Offset(i), int64(p.m.BlockLen(i))
		if off+n > size {
			break
		}
		if n > 0 && !hasData(p.f, off, n) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := p.f.ReadAt(buf, off); err != nil {
			return err
		}
		if Sum(buf) == id {
			p.ok[i] = true
			found++
		}
	}
	if found > 0 {
		p.d.log.Info("resuming a partial file", "file", p.file.Short(), "blocks_in_place", found, "blocks", len(p.m.Blocks))
	}
	return nil
}

// File returns the partial file, open for reading and writing. The caller
// writes block i at m.Offset(i).
func (p *Partial) File() *os.File { return p.f }

// InPlace reports whether block i was found in the partial file, verified,
// when it was opened.
func (p *Partial) InPlace(i int) bool { return p.ok[i] }

func (p *Partial) release() {
	p.d.mu.Lock()
	if p.d.parts[p.name] {
		p.d.reserved -= p.m.Size
	}
	delete(p.d.parts, p.name)
	p.d.mu.Unlock()
}

// Close closes the partial file and keeps it for a later resume.
func (p *Partial) Close() error {
	if p.f == nil {
		return nil
	}
	err := p.f.Close()
	if p.dio != nil {
		err = errors.Join(err, p.dio.Close())
	}
	p.f = nil
	p.release()
	return err
}

// Remove closes the partial file and removes it.
func (p *Partial) Remove() error {
	err := p.Close()
	if rerr := p.d.root.Remove(p.name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// Install makes the partial file, which must hold every block of the file
// (each verified on receipt, copied from verified reads, or found in place
// at open), a whole file of the store: fsync, rename to files/<file ID>
// (replacing an older copy), fsync of files/. From the rename on, the
// store holds the file's blocks (Has, Get, List); the name is durable when
// Install returns. The manifest must be held as a block file. The Partial
// is closed. The bytes are on disk already: a capped store makes room for
// them at its next Put, not here (a GC now could take the manifest).
func (p *Partial) Install(ctx context.Context) error {
	d := p.d
	if p.f == nil {
		return fmt.Errorf("install %s: partial closed", p.file.Short())
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("install %s: %w", p.file.Short(), err)
	}
	if err := p.f.Chmod(0o644); err != nil {
		return fmt.Errorf("install %s: %w", p.file.Short(), err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("install %s: fsync: %w", p.file.Short(), err)
	}
	if err := p.Close(); err != nil {
		return fmt.Errorf("install %s: %w", p.file.Short(), err)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("install %s: store closed", p.file.Short())
	}
	if err := d.root.Rename(p.name, objectPath(p.file)); err != nil {
		d.mu.Unlock()
		return fmt.Errorf("install %s: %w", p.file.Short(), err)
	}
	d.addObjectLocked(newObject(p.file, p.m))
	d.mu.Unlock()
	if err := syncDir(d.root, filesDir); err != nil {
		return fmt.Errorf("install %s: fsync directory: %w", p.file.Short(), err)
	}
	return nil
}

// LinkFile makes dest a hard link to the whole file file held by the store
// (see Partial.Install), atomically: a link under a temporary name in
// dest's directory, renamed over dest, then that directory fsynced. dest
// and the store share the bytes from then on: the store still verifies
// every block it reads from them, and quarantines its link if they change.
// dest must be on the store's file system.
func (d *DiskStore) LinkFile(file ID, dest string) error {
	if !d.HasFile(file) {
		return fmt.Errorf("link %s: %w", file.Short(), ErrNotFound)
	}
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	var r [8]byte
	rand.Read(r[:])
	tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(r[:]))
	if err := os.Link(filepath.Join(d.dir, objectPath(file)), tmp); err != nil {
		return fmt.Errorf("link %s: %w", file.Short(), err)
	}
	err := os.Rename(tmp, dest)
	// rename(2) does nothing when both names are links to one file (dest
	// was linked to this whole file already): tmp is then still there.
	os.Remove(tmp)
	if err != nil {
		return fmt.Errorf("link %s: %w", file.Short(), err)
	}
	df, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("link %s: %w", file.Short(), err)
	}
	err = df.Sync()
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("link %s: fsync directory: %w", file.Short(), err)
	}
	return nil
}

// CheckFile re-hashes every block of the whole file file against its
// manifest, at every position, as reading them would: a whole file that
// fails is quarantined (ErrCorrupt). ErrNotFound if the store does not hold
// file in one piece.
func (d *DiskStore) CheckFile(ctx context.Context, file ID) error {
	d.mu.Lock()
	o := d.objs[file]
	d.mu.Unlock()
	if o == nil {
		return fmt.Errorf("check %s: %w", file.Short(), ErrNotFound)
	}
	var buf []byte
	for i, id := range o.m.Blocks {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("check %s: %w", file.Short(), err)
		}
		b, err := d.readObjectBlock(o, id, i, buf)
		if err != nil {
			return fmt.Errorf("check %s: %w", file.Short(), err)
		}
		buf = b
	}
	return nil
}

// SameFileSystem reports whether path (a file or directory, existing) is
// on the store's file system, so that LinkFile can link into it.
func (d *DiskStore) SameFileSystem(path string) bool {
	return sameDevice(d.dir, path)
}
