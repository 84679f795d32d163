package blocks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

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
	return d.PutVerified(ctx, trusted(id, data))
}

// PutVerified is Put without re-hashing: v was checked against its ID by
// Verify (on receipt from a peer) or by this package.
func (d *DiskStore) PutVerified(ctx context.Context, v Verified) error {
	id, data := v.id, v.data
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if len(data) > MaxBlockSize {
		return fmt.Errorf("put block %s: %d bytes: %w", id.Short(), len(data), ErrTooLarge)
	}
	if d.held(id) {
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

func (d *DiskStore) putHashed(ctx context.Context, id ID, data []byte) error {
	return d.PutVerified(ctx, trusted(id, data))
}

// castagnoli is the CRC32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errNoXattr: the file system does not support user extended attributes.
var errNoXattr = errors.New("user extended attributes not supported")

// writeTemp writes data to a new temporary file in id's block directory,
// records its CRC32C (see ReadBlock), makes it read-only and starts its
// write-back. It returns the file still open and not yet fsynced; on error
// it leaves nothing behind.
func (d *DiskStore) writeTemp(id ID, data []byte) (string, *os.File, error) {
	// Writable until the CRC32C is recorded: setting a user extended
	// attribute needs write permission on the file, not just the descriptor.
	dir, err := d.fanoutDir(id[0])
	if err != nil {
		return "", nil, err
	}
	tmp, f, err := createTemp(d.root, dir, id.String(), 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("create temp file: %w", err)
	}
	fail := func(err error) (string, *os.File, error) {
		f.Close()
		d.removeTemp(tmp)
		return "", nil, err
	}
	direct, err := d.writeDirect(dir, tmp, data)
	if err != nil {
		return fail(fmt.Errorf("write: %w", err))
	}
	if !direct {
		if _, err := f.Write(data); err != nil {
			return fail(fmt.Errorf("write: %w", err))
		}
	}
	if !d.noXattr.Load() {
		// Without the attribute, reads of the block fall back to SHA-256:
		// slower, never weaker. So a failure here is not the Put's.
		if err := setCRC(f, crc32.Checksum(data, castagnoli)); errors.Is(err, errNoXattr) {
			d.noXattr.Store(true)
			d.log.Info("file system has no user extended attributes: blocks are read back with SHA-256 only")
		} else if err != nil {
			d.log.Debug("cannot record crc32c", "path", tmp, "err", err)
		}
	}
	if err := f.Chmod(0o444); err != nil {
		return fail(fmt.Errorf("chmod: %w", err))
	}
	if !direct && !d.ephemeral {
		startWriteback(f)
	}
	return tmp, f, nil
}

// writeDirect writes a block's bytes to its new temporary file tmp (in
// dir) with direct I/O, from a 4 KiB-aligned buffer (data itself, as the
// fetcher receives blocks, or a pooled copy), when the file system allows
// it and the length is a multiple of 4 KiB (every block of a file but its
// last, at the default block size). The bytes then go to the disk without
// passing through the page cache: copying a fetched 1 GiB into the page
// cache, block file by block file, cost more CPU than the fetch itself
// (perf: copy_folio_from_iter_atomic), and its write-back more again. It
// reports false, having written nothing, where it does not apply.
func (d *DiskStore) writeDirect(dir, tmp string, data []byte) (bool, error) {
	if d.ephemeral || d.noDirect.Load() || len(data) == 0 || len(data)%dioAlign != 0 {
		return false, nil
	}
	df := openDirect(d.root, filepath.Join(d.dir, dir), tmp)
	if df == nil {
		d.noDirect.Store(true)
		return false, nil
	}
	defer df.Close()
	buf, bp := alignedCopy(data)
	defer putAligned(bp)
	if _, err := df.WriteAt(buf, 0); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			d.noDirect.Store(true)
			d.log.Info("direct I/O refused; writing blocks through the page cache", "err", err)
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (d *DiskStore) removeTemp(tmp string) {
	if err := d.root.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Error("cannot remove temp file", "path", tmp, "err", err)
	}
}

// writeBlock makes one block durable: temp file, fsync, rename, fsync of
// the directory.
func (d *DiskStore) writeBlock(id ID, data []byte) error {
	tmp, f, err := d.writeTemp(id, data)
	if err != nil {
		return err
	}
	if err := d.syncBlock(f); err != nil {
		f.Close()
		d.removeTemp(tmp)
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		d.removeTemp(tmp)
		return fmt.Errorf("close: %w", err)
	}
	renamed, err := d.install(id, tmp, int64(len(data)))
	if err != nil || !renamed {
		return err
	}
	// The rename is only durable once the directory is.
	if err := d.syncBlockDir(fanout(id[0])); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

// install renames the durable temporary file tmp to id's block name,
// unless a concurrent Put got there first (then tmp is removed and
// renamed is false). The caller fsyncs the directory afterwards. On error
// tmp is removed.
func (d *DiskStore) install(id ID, tmp string, size int64) (renamed bool, err error) {
	p := blockPath(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.removeTemp(tmp)
		return false, errors.New("store closed")
	}
	if fi, lerr := d.root.Lstat(p); lerr == nil && fi.Mode().IsRegular() {
		d.removeTemp(tmp)
		return false, nil
	}
	if err := d.root.Rename(tmp, p); err != nil {
		d.removeTemp(tmp)
		return false, fmt.Errorf("rename: %w", err)
	}
	d.nblocks++
	d.nbytes += size
	if d.pinned[id] == 0 {
		d.gen++
	}
	return true, nil
}

// createTemp creates dir/.tmp-<stem>-<random> exclusively, with mode perm.
func createTemp(root *os.Root, dir, stem string, perm os.FileMode) (string, *os.File, error) {
	for range 10 {
		var r [8]byte
		rand.Read(r[:])
		name := dir + "/" + tmpPrefix + stem + "-" + hex.EncodeToString(r[:])
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, errors.New("cannot find an unused temp file name")
}

// syncBlock fsyncs a block's file, and syncBlockDir a directory of
// blocks, unless the store is ephemeral.
func (d *DiskStore) syncBlock(f *os.File) error {
	if d.ephemeral {
		return nil
	}
	d.syncs.Add(1)
	return f.Sync()
}

func (d *DiskStore) syncBlockDir(name string) error {
	if d.ephemeral {
		return nil
	}
	d.syncs.Add(1)
	return syncDir(d.root, name)
}

func syncDir(root *os.Root, name string) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
