package blocks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"
)

// putWorkers bounds the blocks PutFile hashes and stores at once; PutFile
// holds at most putWorkers+1 blocks in memory.
const putWorkers = 4

// putBatchBytes is how many bytes of blocks PutFile writes into a
// DiskStore before committing them (see Batch).
const putBatchBytes = 32 << 20

// PutFile cuts r into blocks of blockSize bytes (0 means DefaultBlockSize),
// stores each block and then the manifest in s, and returns the manifest
// and the file's ID (the manifest block's ID). It streams: at most a few
// blocks are in memory at once, whatever r's length. Files longer than
// MaxFileSize, or whose manifest would exceed MaxManifestSize, are
// rejected.
func PutFile(ctx context.Context, s Store, r io.Reader, blockSize int) (*Manifest, ID, error) {
	if blockSize == 0 {
		blockSize = DefaultBlockSize
	}
	if blockSize < 0 || blockSize > MaxBlockSize {
		return nil, ID{}, fmt.Errorf("put file: block size %d outside 1..%d", blockSize, MaxBlockSize)
	}
	maxBlocks := (MaxManifestSize - manifestLen(0, MaxFileSize, MaxBlockSize) - binary.MaxVarintLen64) / IDSize

	put := s.Put
	var batch *Batch
	if d, ok := s.(*DiskStore); ok {
		// Blocks go to disk in batches, one durability pass each; the
		// manifest is written only once every batch is committed.
		batch = d.NewBatch()
		put = func(ctx context.Context, id ID, data []byte) error {
			if err := batch.Put(ctx, trusted(id, data)); err != nil {
				return err
			}
			if batch.Bytes() >= putBatchBytes {
				_, err := batch.Commit()
				return err
			}
			return nil
		}
	} else if own, ok := s.(ownStore); ok {
		put = own.putHashed
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(putWorkers)
	free := make(chan []byte, putWorkers+1)
	allocated := 0
	getBuf := func() ([]byte, error) {
		select {
		case b := <-free:
			return b, nil
		default:
		}
		if allocated < putWorkers+1 {
			allocated++
			return make([]byte, blockSize), nil
		}
		select {
		case b := <-free:
			return b, nil
		case <-gctx.Done():
			return nil, gctx.Err()
		}
	}

	var (
		ids  []*ID
		size int64
	)
	readErr := func() error {
		for {
			if err := gctx.Err(); err != nil {
				return err
			}
			buf, err := getBuf()
			if err != nil {
				return err
			}
			n, err := io.ReadFull(r, buf)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("read: %w", err)
			}
			size += int64(n)
			if size > MaxFileSize {
				return fmt.Errorf("file larger than %d bytes", int64(MaxFileSize))
			}
			if len(ids) >= maxBlocks {
				return fmt.Errorf("more than %d blocks of %d bytes: use a larger block size", maxBlocks, blockSize)
			}
			idp := new(ID)
			ids = append(ids, idp)
			block := buf[:n]
			g.Go(func() error {
				defer func() { free <- buf }()
				*idp = Sum(block)
				return put(gctx, *idp, block)
			})
			if n < blockSize {
				return nil // short read: that was the last block
			}
		}
	}()
	err := g.Wait()
	if err == nil {
		err = readErr
	}
	if batch != nil {
		if err != nil {
			batch.Abort()
		} else {
			_, err = batch.Commit()
		}
	}
	if err != nil {
		return nil, ID{}, fmt.Errorf("put file: %w", err)
	}
	m := &Manifest{Size: size, BlockSize: blockSize, Blocks: make([]ID, len(ids))}
	for i, p := range ids {
		m.Blocks[i] = *p
	}
	enc := m.Encode()
	id := Sum(enc)
	if err := s.Put(ctx, id, enc); err != nil {
		return nil, ID{}, fmt.Errorf("put file: manifest: %w", err)
	}
	return m, id, nil
}

// PutPath stores the file at path with PutFile.
func PutPath(ctx context.Context, s Store, path string, blockSize int) (*Manifest, ID, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ID{}, fmt.Errorf("put file: %w", err)
	}
	defer f.Close()
	m, id, err := PutFile(ctx, s, f, blockSize)
	if err != nil {
		return nil, ID{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, id, nil
}

// ReadManifest gets the block file from s and decodes it as a manifest.
// The store has verified the block against file, so the manifest is the
// one the file ID names.
func ReadManifest(ctx context.Context, s Store, file ID) (*Manifest, error) {
	b, err := s.Get(ctx, file)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", file.Short(), err)
	}
	if Sum(b) != file {
		return nil, fmt.Errorf("read manifest %s: %w", file.Short(), ErrCorrupt)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", file.Short(), err)
	}
	return m, nil
}

// WriteFile writes the file m describes to w, block by block, checking
// every block against its ID and expected length. The stores of this
// package verify on Get; blocks from any other Store are re-hashed here,
// so a faulty implementation cannot slip wrong bytes through. All blocks
// must be held (see Missing).
func WriteFile(ctx context.Context, s Store, m *Manifest, w io.Writer) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	_, verified := s.(ownStore)
	for i, id := range m.Blocks {
		data, err := s.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("write file: block %d: %w", i, err)
		}
		if want := m.BlockLen(i); len(data) != want {
			return fmt.Errorf("write file: block %d (%s) is %d bytes, manifest says %d: %w",
				i, id.Short(), len(data), want, ErrCorrupt)
		}
		if !verified {
			if got := Sum(data); got != id {
				return fmt.Errorf("write file: block %d (%s) hashes to %s: %w", i, id.Short(), got.Short(), ErrCorrupt)
			}
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write file: block %d: %w", i, err)
		}
	}
	return nil
}

// ExportFile writes the file named by file to dest with mode 0644; see
// ExportFileMode.
func ExportFile(ctx context.Context, s Store, file ID, dest string) error {
	return ExportFileMode(ctx, s, file, dest, 0o644)
}

// ExportFileMode writes the file named by file to dest atomically: into a
// temporary file in dest's directory, fsynced, given mode (0755 for an
// executable) and renamed over dest, then the directory is fsynced. On
// any error dest is left as it was.
func ExportFileMode(ctx context.Context, s Store, file ID, dest string, mode os.FileMode) (err error) {
	m, err := ReadManifest(ctx, s, file)
	if err != nil {
		return fmt.Errorf("export %s: %w", dest, err)
	}
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("export %s: %w", dest, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("export %s: %w", dest, err)
		}
	}()
	if err := WriteFile(ctx, s, m, f); err != nil {
		return err
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

// Missing returns, in order, the indices of m's blocks that s does not
// hold. A block that appears several times in m is asked about once.
func Missing(ctx context.Context, s Store, m *Manifest) ([]int, error) {
	var missing []int
	known := make(map[ID]bool, len(m.Blocks))
	for i, id := range m.Blocks {
		has, ok := known[id]
		if !ok {
			var err error
			has, err = s.Has(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("missing blocks: block %d: %w", i, err)
			}
			known[id] = has
		}
		if !has {
			missing = append(missing, i)
		}
	}
	return missing, nil
}
