package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/p2pc/p2pc/internal/blocks"
)

// FetchFile is Fetch that also writes the file to dest, atomically, every
// block verified.
//
// When the store is a blocks.DiskStore on dest's file system, the file is
// written once: each block, verified on receipt, goes straight to its
// offsets in a partial file inside the store (blocks.Partial; blocks held
// before the fetch are copied in, from the store or from an earlier
// attempt's partial file, where they are re-verified); the complete file
// is then fsynced and becomes a whole file of the store
// (Partial.Install), and dest a hard link to it, made under a temporary
// name and renamed over dest, dest's directory fsynced. The store holds
// the file's blocks from then on, sharing the bytes with dest. A fetch that
// is killed keeps its partial file, and the next FetchFile of the same
// file resumes from it.
//
// Otherwise (another store, another file system) the blocks go to the
// store as Fetch stores them and to a temporary file next to dest as they
// land; that file is fsynced and renamed over dest, and dest's directory
// fsynced.
//
// On error dest is left as it was.
func (f *Fetcher) FetchFile(ctx context.Context, file blocks.ID, peers []string, p Progress, dest string) (st *FetchStats, err error) {
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	if ds, ok := f.store.(*blocks.DiskStore); ok && ds.SameFileSystem(dir) {
		return f.fetchInPlace(ctx, ds, file, peers, p, dest)
	}
	out, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", file.Short(), err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(out.Name())
		}
	}()
	r := f.newFetch(file, p)
	r.out = out
	st, err = f.finish(r, r.run(ctx, file, peers))
	if err != nil {
		return st, err
	}
	if err := r.copyHeld(ctx); err != nil {
		return st, fmt.Errorf("fetch %s: %w", file.Short(), err)
	}
	if err := commitFile(out, dest); err != nil {
		return st, fmt.Errorf("fetch %s: %w", file.Short(), err)
	}
	return st, nil
}

// fetchInPlace is FetchFile assembling the file inside the store ds.
func (f *Fetcher) fetchInPlace(ctx context.Context, ds *blocks.DiskStore, file blocks.ID, peers []string, p Progress, dest string) (*FetchStats, error) {
	if ds.HasFile(file) {
		// Held in one piece already (an earlier FetchFile): check every
		// block, as a read would, and link it. A whole file that fails is
		// quarantined, and the fetch below gets what it lacked.
		if st, err := f.linkHeld(ctx, ds, file, p, dest); err == nil || !errors.Is(err, blocks.ErrCorrupt) {
			return st, err
		}
	}
	r := f.newFetch(file, p)
	r.inPlace = ds
	err := r.run(ctx, file, peers)
	if err == nil {
		err = r.copyHeld(ctx)
	}
	if err == nil && r.part != nil {
		err = r.part.Install(ctx) // closes it
	}
	if err == nil {
		err = link(ctx, ds, file, dest)
	}
	if err != nil && r.part != nil {
		r.part.Close() // kept for the next attempt
	}
	return f.finish(r, err)
}

// linkHeld is FetchFile of a file the store holds in one piece.
func (f *Fetcher) linkHeld(ctx context.Context, ds *blocks.DiskStore, file blocks.ID, p Progress, dest string) (*FetchStats, error) {
	r := f.newFetch(file, p)
	err := ds.CheckFile(ctx, file)
	if err == nil {
		var m *blocks.Manifest
		if m, err = blocks.ReadManifest(ctx, ds, file); err == nil {
			r.st.setCounts(m.Size, distinct(m.Blocks), distinct(m.Blocks))
			if p != nil {
				if t, ok := p.(ProgressTotal); ok {
					t.SetTotal(m.Size)
				}
				p.Add(m.Size)
			}
			err = link(ctx, ds, file, dest)
		}
	}
	return f.finish(r, err)
}

func distinct(ids []blocks.ID) int {
	seen := make(map[blocks.ID]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	return len(seen)
}

// link makes dest a hard link to the whole file, or, where the file system
// refuses the link (dest behind another mount of the same file system, a
// link count at its limit), a copy of it, written like ExportFile does:
// every block read back and verified, temporary file, fsync, rename.
func link(ctx context.Context, ds *blocks.DiskStore, file blocks.ID, dest string) error {
	err := ds.LinkFile(file, dest)
	if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EMLINK) || errors.Is(err, syscall.EPERM) {
		return blocks.ExportFile(ctx, ds, file, dest)
	}
	return err
}

// writeOut writes a verified block at the manifest positions idx of
// FetchFile's destination. It is safe for concurrent use (pwrite).
func (r *fetch) writeOut(idx []int, data []byte) error {
	if r.out == nil {
		return nil
	}
	for _, i := range idx {
		off := r.m.Offset(i)
		if r.part != nil {
			if err := r.part.WriteAt(data, off); err != nil {
				return fmt.Errorf("write file: block %d: %w", i, err)
			}
			continue
		}
		if _, err := r.out.WriteAt(data, off); err != nil {
			return fmt.Errorf("write file: block %d: %w", i, err)
		}
		// Start writing it to disk now, so that the final fsync finds
		// little left to do.
		blocks.StartWriteback(r.out, off, int64(len(data)))
	}
	return nil
}

// copyHeld writes the blocks held before the fetch into FetchFile's
// destination: read (and so verified) from the store, or, when assembling
// in place, copied from another position of the partial file where the
// block was found verified.
func (r *fetch) copyHeld(ctx context.Context) error {
	if r.out == nil {
		return nil
	}
	var buf []byte
	for _, i := range r.heldIdx {
		id := r.m.Blocks[i]
		var data []byte
		if j, ok := r.fromPos[id]; ok {
			if n := r.m.BlockLen(j); cap(buf) < n {
				buf = make([]byte, n)
			}
			data = buf[:r.m.BlockLen(j)]
			if _, err := r.out.ReadAt(data, r.m.Offset(j)); err != nil {
				return fmt.Errorf("write file: block %d: %w", i, err)
			}
		} else {
			var err error
			if data, err = r.store.Get(ctx, id); err != nil {
				return fmt.Errorf("write file: block %d: %w", i, err)
			}
		}
		if len(data) != r.m.BlockLen(i) {
			return fmt.Errorf("write file: block %d (%s) is %d bytes, manifest says %d: %w",
				i, id.Short(), len(data), r.m.BlockLen(i), blocks.ErrCorrupt)
		}
		if err := r.writeOut([]int{i}, data); err != nil {
			return err
		}
	}
	return nil
}

// commitFile makes the temporary file out durable and renames it to dest.
func commitFile(out *os.File, dest string) error {
	if err := out.Chmod(0o644); err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("write file: fsync: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	if err := os.Rename(out.Name(), dest); err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	d, err := os.Open(filepath.Dir(dest))
	if err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("write file: fsync directory: %w", err)
	}
	return nil
}
