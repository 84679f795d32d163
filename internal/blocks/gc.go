package blocks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// pinHeader is the first line of every pin file; one hex ID per line follows.
const pinHeader = "p2pc-pin v1"

// maxPinName bounds a pin name's length.
const maxPinName = 200

// GCStats reports what GC did.
type GCStats struct {
	Scanned      int   // blocks looked at
	Removed      int   // blocks removed
	RemovedBytes int64 // bytes removed
	Blocks       int   // blocks held afterwards
	Bytes        int64 // bytes held afterwards
	PinnedBytes  int64 // bytes of pinned blocks held afterwards
}

// VerifyStats reports what Verify found.
type VerifyStats struct {
	Blocks  int   // blocks that verified
	Bytes   int64 // bytes of blocks that verified
	Corrupt []ID  // blocks that did not match their ID, now quarantined
}

// ValidPinName reports whether name may name a pin: 1 to 200 characters
// from [A-Za-z0-9._:-], not starting with '.'. Job IDs and
// "job-<hex>"-style names fit.
func ValidPinName(name string) bool {
	if name == "" || len(name) > maxPinName || name[0] == '.' {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '-':
		default:
			return false
		}
	}
	return true
}

// Pin adds ids to the pin called name, creating it if needed. GC never
// removes a pinned block. The ids need not be held yet: pin a job's blocks
// first, then fetch the Missing ones. The pin is written to pins/<name>
// (temp file, fsync, rename, fsync directory) before Pin returns, so it
// survives a crash or restart.
func (d *DiskStore) Pin(name string, ids ...ID) error {
	if !ValidPinName(name) {
		return fmt.Errorf("pin %q: invalid name", name)
	}
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	d.mu.Lock()
	set := make(map[ID]struct{}, len(d.pins[name])+len(ids))
	for id := range d.pins[name] {
		set[id] = struct{}{}
	}
	d.mu.Unlock()
	for _, id := range ids {
		set[id] = struct{}{}
	}
	if err := d.writePin(name, set); err != nil {
		return fmt.Errorf("pin %q: %w", name, err)
	}
	// State after data: the in-memory pin follows the durable one.
	d.mu.Lock()
	d.setPinLocked(name, set)
	d.mu.Unlock()
	return nil
}

// Unpin removes the pin called name; its blocks become collectable unless
// another pin holds them. Unpinning an unknown name is not an error.
func (d *DiskStore) Unpin(name string) error {
	if !ValidPinName(name) {
		return fmt.Errorf("unpin %q: invalid name", name)
	}
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	if err := d.root.Remove(pinsDir + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpin %q: %w", name, err)
	}
	if err := syncDir(d.root, pinsDir); err != nil {
		return fmt.Errorf("unpin %q: fsync directory: %w", name, err)
	}
	d.mu.Lock()
	d.setPinLocked(name, nil)
	d.gen++
	d.mu.Unlock()
	return nil
}

// Pins returns the names of the pins held, sorted.
func (d *DiskStore) Pins() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := make([]string, 0, len(d.pins))
	for name := range d.pins {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Pinned reports whether any pin holds id.
func (d *DiskStore) Pinned(id ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pinned[id] > 0
}

// setPinLocked replaces the pin name by set (nil removes it), keeping the
// reference counts in d.pinned. d.mu must be held.
func (d *DiskStore) setPinLocked(name string, set map[ID]struct{}) {
	for id := range d.pins[name] {
		if d.pinned[id]--; d.pinned[id] <= 0 {
			delete(d.pinned, id)
		}
	}
	delete(d.pins, name)
	if set == nil {
		return
	}
	d.pins[name] = set
	for id := range set {
		d.pinned[id]++
	}
}

func (d *DiskStore) writePin(name string, set map[ID]struct{}) (err error) {
	ids := make([]ID, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	var buf bytes.Buffer
	buf.Grow(len(pinHeader) + 1 + len(ids)*(2*IDSize+1))
	buf.WriteString(pinHeader + "\n")
	for _, id := range ids {
		buf.WriteString(id.String())
		buf.WriteByte('\n')
	}
	tmp, f, err := createTemp(d.root, pinsDir, name, 0o444)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			d.root.Remove(tmp)
		}
	}()
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := d.root.Rename(tmp, pinsDir+"/"+name); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if err := syncDir(d.root, pinsDir); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

// loadPins reads pins/ at open, removing temp files; it returns how many
// it removed. A pin file that does not parse (only possible through
// outside damage, since pins are written atomically) is moved to
// quarantine/ and logged: its blocks become collectable, which costs a
// re-fetch, not correctness.
func (d *DiskStore) loadPins() (int, error) {
	ents, err := readDir(d.root, pinsDir)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range ents {
		name := e.Name()
		p := pinsDir + "/" + name
		if strings.HasPrefix(name, tmpPrefix) {
			if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("remove stale temp file: %w", err)
			}
			removed++
			continue
		}
		if !ValidPinName(name) || !e.Type().IsRegular() {
			d.log.Warn("ignoring unexpected file in pins", "path", p)
			continue
		}
		set, err := d.readPin(p)
		if err != nil {
			q := fmt.Sprintf("%s/pin-%s.%d", quarantineDir, name, time.Now().UnixNano())
			d.log.Error("unreadable pin file quarantined; its blocks are no longer pinned", "pin", name, "err", err, "path", q)
			if err := d.root.Rename(p, q); err != nil {
				return removed, fmt.Errorf("quarantine pin file %s: %w", name, err)
			}
			continue
		}
		d.setPinLocked(name, set)
	}
	return removed, nil
}

func (d *DiskStore) readPin(p string) (map[ID]struct{}, error) {
	b, err := d.root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != pinHeader {
		return nil, fmt.Errorf("no %q header", pinHeader)
	}
	set := make(map[ID]struct{})
	for line := 2; sc.Scan(); line++ {
		id, err := ParseID(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		set[id] = struct{}{}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("truncated last line")
	}
	return set, sc.Err()
}

// GC removes unpinned blocks, least recently used first (by mtime, which
// Get and Put refresh), until the store holds at most maxBytes. Pinned
// blocks are never removed: if they alone exceed maxBytes, GC removes
// every unpinned block, logs a warning and returns without error. A block
// used while GC runs is skipped.
func (d *DiskStore) GC(ctx context.Context, maxBytes int64) (GCStats, error) {
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	return d.gcLocked(ctx, maxBytes)
}

// gcEntry is something GC may remove: a block file, a whole file (obj
// set) or a partial file no fetch is using (part set).
type gcEntry struct {
	id   ID
	fi   fs.FileInfo
	obj  *object
	part string
}

func (d *DiskStore) gcLocked(ctx context.Context, maxBytes int64) (GCStats, error) {
	var st GCStats
	d.mu.Lock()
	startGen := d.gen
	d.exhausted = false
	objs := make([]*object, 0, len(d.objs))
	for _, o := range d.objs {
		objs = append(objs, o)
	}
	d.mu.Unlock()
	var cands []gcEntry
	err := d.list(ctx, func(id ID, fi fs.FileInfo) error {
		st.Scanned++
		cands = append(cands, gcEntry{id: id, fi: fi})
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("gc: %w", err)
	}
	for _, o := range objs {
		if fi, err := d.root.Lstat(objectPath(o.id)); err == nil {
			st.Scanned += len(o.first)
			cands = append(cands, gcEntry{id: o.id, fi: fi, obj: o})
		}
	}
	// Partial files take space without holding blocks: they go when GC
	// runs short of its target (all of them for GC(0)), oldest first.
	var partBytes int64
	ents, err := readDir(d.root, filesDir)
	if err != nil {
		return st, fmt.Errorf("gc: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), partPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			cands = append(cands, gcEntry{fi: fi, part: filesDir + "/" + e.Name()})
			partBytes += fi.Size()
		}
	}
	slices.SortFunc(cands, func(a, b gcEntry) int { return a.fi.ModTime().Compare(b.fi.ModTime()) })
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("gc: %w", err)
		}
		d.mu.Lock()
		if d.nbytes+partBytes <= maxBytes {
			d.mu.Unlock()
			break
		}
		var err error
		switch {
		case c.part != "":
			if d.parts[c.part] {
				d.mu.Unlock()
				continue // a fetch is writing it
			}
			partBytes -= c.fi.Size()
			err = d.root.Remove(c.part)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		case c.obj != nil:
			if d.pinnedFileLocked(c.obj) {
				d.mu.Unlock()
				continue
			}
			err = d.removeObjectFileLocked(c.obj, c.fi)
			if err == nil && d.objs[c.obj.id] == nil {
				// Its manifest, kept while the whole file was there.
				if fi, lerr := d.root.Lstat(blockPath(c.obj.id)); lerr == nil && d.removeLocked(c.obj.id, nil) == nil {
					st.Removed++
					st.RemovedBytes += fi.Size()
				}
			}
		default:
			if d.pinned[c.id] > 0 || d.objs[c.id] != nil { // a whole file's manifest goes with it
				d.mu.Unlock()
				continue
			}
			err = d.removeLocked(c.id, c.fi)
		}
		d.mu.Unlock()
		switch {
		case errors.Is(err, errChanged):
			// Used or replaced since the scan: now among the most recent.
		case err != nil:
			return st, fmt.Errorf("gc: remove %s: %w", c.fi.Name(), err)
		case c.obj != nil:
			st.Removed += len(c.obj.first)
			st.RemovedBytes += c.fi.Size()
		case c.part == "":
			st.Removed++
			st.RemovedBytes += c.fi.Size()
		}
	}
	d.mu.Lock()
	st.Blocks, st.Bytes = d.nblocks, d.nbytes
	for _, c := range cands {
		if c.obj != nil && d.objs[c.obj.id] == c.obj && d.pinnedFileLocked(c.obj) ||
			c.obj == nil && c.part == "" && d.pinned[c.id] > 0 {
			st.PinnedBytes += c.fi.Size()
		}
	}
	// Over the target after going through every candidate: only pinned
	// (or just used) blocks are left, and another GC is pointless until
	// something collectable appears.
	d.exhausted, d.exhaustAt = st.Bytes > maxBytes, startGen
	d.mu.Unlock()
	if st.Bytes > maxBytes {
		d.log.Warn("store over its cap after gc: the rest is pinned or in use",
			"bytes", st.Bytes, "cap", maxBytes, "pinned_bytes", st.PinnedBytes)
	}
	if st.Removed > 0 {
		d.log.Info("gc", "removed", st.Removed, "removed_bytes", st.RemovedBytes, "bytes", st.Bytes)
	}
	return st, nil
}

// pinnedFileLocked reports whether a pin holds the whole file o: its file
// ID or any of its blocks. d.mu must be held.
func (d *DiskStore) pinnedFileLocked(o *object) bool {
	if d.pinned[o.id] > 0 {
		return true
	}
	for id := range o.first {
		if d.pinned[id] > 0 {
			return true
		}
	}
	return false
}

// makeRoom runs GC before a Put of n bytes that would take the store over
// its cap (the partial files open count as held). GC aims a sixteenth of
// the cap lower, so that a stream of Puts does not rescan the store on
// every block; and it is skipped when the last GC found nothing more to
// collect and nothing collectable has appeared since (everything left is
// pinned). Still over: a *FullError with a hard cap, else a warning.
func (d *DiskStore) makeRoom(ctx context.Context, n int64) error {
	if d.maxBytes <= 0 {
		return nil
	}
	over := func() (bool, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.nbytes+d.reserved+n > d.maxBytes, !d.exhausted || d.gen != d.exhaustAt
	}
	if o, _ := over(); !o {
		return nil
	}
	d.gcMu.Lock()
	o, dirty := over()
	if o && dirty {
		target := max(d.maxBytes-n-d.maxBytes/16, 0)
		if _, err := d.gcLocked(ctx, target); err != nil {
			d.gcMu.Unlock()
			return err
		}
		o, _ = over()
	}
	d.gcMu.Unlock()
	if !o {
		return nil
	}
	d.mu.Lock()
	warn := time.Since(d.overLog) > time.Minute
	if warn {
		d.overLog = time.Now()
	}
	held := d.nbytes + d.reserved
	d.mu.Unlock()
	if d.hard {
		if warn {
			d.log.Warn("store at its cap: refusing what does not fit (the rest is pinned or in use)", "bytes", held, "need", n, "cap", d.maxBytes)
		}
		return &FullError{Need: n, Held: held, Cap: d.maxBytes}
	}
	if warn {
		d.log.Warn("store over its cap: pinned data exceeds it", "bytes", held+n, "cap", d.maxBytes)
	}
	return nil
}

// Verify re-hashes every block, quarantining those that no longer match
// their ID (a whole file with a bad block is quarantined as a whole). It
// does not stop at a corrupt block; it stops at an I/O error or when ctx
// is done.
func (d *DiskStore) Verify(ctx context.Context) (VerifyStats, error) {
	var st VerifyStats
	err := d.list(ctx, func(id ID, fi fs.FileInfo) error {
		_, err := d.read(id, nil, checkScrub)
		switch {
		case errors.Is(err, ErrCorrupt):
			st.Corrupt = append(st.Corrupt, id)
			return nil
		case errors.Is(err, ErrNotFound):
			return nil // removed since listed
		case err != nil:
			return fmt.Errorf("block %s: %w", id.Short(), err)
		}
		st.Blocks++
		st.Bytes += fi.Size()
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("verify: %w", err)
	}
	d.mu.Lock()
	objs := make([]*object, 0, len(d.objs))
	for _, o := range d.objs {
		objs = append(objs, o)
	}
	d.mu.Unlock()
	var buf []byte
objects:
	for _, o := range objs {
		// Every position, not only each distinct block's first: the bytes
		// are also the FetchFile destination's.
		for i, id := range o.m.Blocks {
			if err := ctx.Err(); err != nil {
				return st, fmt.Errorf("verify: %w", err)
			}
			b, err := d.readObjectBlock(o, id, i, buf)
			switch {
			case errors.Is(err, ErrCorrupt):
				st.Corrupt = append(st.Corrupt, id)
				continue objects
			case errors.Is(err, ErrNotFound):
				continue objects
			case err != nil:
				return st, fmt.Errorf("verify: whole file %s: %w", o.id.Short(), err)
			}
			buf = b
		}
		st.Blocks += len(o.first)
		st.Bytes += o.m.Size
	}
	return st, nil
}
