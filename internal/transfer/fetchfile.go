package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/blocks"
)

// FetchFile is Fetch that also writes the file to dest, atomically: each
// block is written at its offsets in a temporary file next to dest as soon
// as it has been verified and stored (so the file is assembled while the
// network is busy, not read back afterwards), blocks held before the fetch
// are copied from the store, and the temporary file is fsynced, renamed
// over dest and dest's directory fsynced. On error dest is left as it was.
func (f *Fetcher) FetchFile(ctx context.Context, file blocks.ID, peers []string, p Progress, dest string) (st *FetchStats, err error) {
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
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

// writeOut writes a verified block at the manifest positions idx of
// FetchFile's destination. It is safe for concurrent use (pwrite).
func (r *fetch) writeOut(idx []int, data []byte) error {
	if r.out == nil {
		return nil
	}
	for _, i := range idx {
		if _, err := r.out.WriteAt(data, r.m.Offset(i)); err != nil {
			return fmt.Errorf("write file: block %d: %w", i, err)
		}
	}
	return nil
}

// copyHeld writes the blocks held before the fetch into FetchFile's
// destination, read (and so verified) from the store.
func (r *fetch) copyHeld(ctx context.Context) error {
	if r.out == nil {
		return nil
	}
	for _, i := range r.heldIdx {
		id := r.m.Blocks[i]
		data, err := r.store.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("write file: block %d: %w", i, err)
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
