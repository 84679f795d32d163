package blocks

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// quarantineKeep is how long OpenDisk keeps quarantined files, evidence
// of a failing disk, before removing them.
const quarantineKeep = 7 * 24 * time.Hour

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

// quarantine moves the block file described by fi out of blocks/, unless
// it has been replaced (by a Put of good bytes) since fi was taken.
func (d *DiskStore) quarantine(id ID, fi fs.FileInfo, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quarantineLocked(blockPath(id), "", id, "block", fi, reason) {
		d.nblocks--
		d.nbytes -= fi.Size()
	}
}

// quarantineFile moves the whole file described by fi to quarantine/,
// unless it has been replaced since fi was taken, and forgets its blocks.
func (d *DiskStore) quarantineFile(file ID, fi fs.FileInfo, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quarantineLocked(objectPath(file), "file-", file, "whole file", fi, reason) {
		if o := d.objs[file]; o != nil {
			d.removeObjectLocked(o)
		}
	}
}

// quarantineLocked moves the file at p, described by fi, to
// quarantine/PREFIXID.NANOS (removing it if it cannot be moved) unless it
// has been replaced since fi was taken. It says whether the file left p;
// kind names it in the log. d.mu must be held.
func (d *DiskStore) quarantineLocked(p, prefix string, id ID, kind string, fi fs.FileInfo, reason string) bool {
	cur, err := d.root.Lstat(p)
	if err != nil || !os.SameFile(cur, fi) {
		return false
	}
	q := fmt.Sprintf("%s/%s%s.%d", quarantineDir, prefix, id, time.Now().UnixNano())
	if err := d.root.Rename(p, q); err != nil {
		d.log.Error("cannot quarantine corrupt "+kind+"; removing it", "id", id, "err", err)
		if err := d.root.Remove(p); err != nil {
			d.log.Error("cannot remove corrupt "+kind, "id", id, "err", err)
			return false
		}
		return true
	}
	d.log.Warn("corrupt "+kind+" quarantined", "id", id, "reason", reason, "path", q)
	return true
}
