package blocks

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// syncParallel bounds the fsyncs a Batch commit runs at once. Issued
// together, they let the file system commit its journal once for all of
// them (group commit) instead of once per file.
const syncParallel = 32

// Batch writes many blocks into a DiskStore with one durability pass for
// all of them, instead of the two fsyncs (file, directory) a Put pays per
// block. Put writes each block to a temporary file in its final directory
// (recording its CRC32C and starting its write-back, but not waiting for
// it). Commit then
//
//  1. fsyncs every temporary file of the batch, concurrently;
//  2. renames each to its block name;
//  3. fsyncs every block directory that received a name, concurrently;
//
// and returns only after step 3. The rule is Preon's, state written only
// after the data it describes, applied at two levels:
//
//   - a block's name (the store's only record that it holds the block) is
//     created only after the block's bytes are durable (step 1 before 2),
//     so a crash at any point leaves either a complete block under its
//     name or a temporary file, which OpenDisk removes;
//   - a caller records state that describes a block of the batch (a
//     progress report, a "done" mark, a manifest it now considers complete,
//     an output file renamed into place) only after Commit has returned,
//     when the names themselves are durable.
//
// Blocks of a batch that is never committed are lost on a crash: a fetch
// that is killed re-fetches at most one batch's worth. Between steps 2 and
// 3 a block is visible to Has and Get (its bytes are already durable);
// only its name may still be lost to a power cut, as with Put.
//
// A Batch is safe for concurrent use: Puts may run while a Commit is in
// progress; they go to the next Commit. Bytes in a batch count towards the
// store's cap (DiskOptions.MaxBytes) only once committed.
type Batch struct {
	d *DiskStore

	mu      sync.Mutex
	pending []pendingBlock
	ids     map[ID]bool // in pending or being written
	bytes   int64
}

type pendingBlock struct {
	id   ID
	tmp  string   // "" for a block the store held already
	f    *os.File // open until fsynced
	size int64
}

// NewBatch returns an empty Batch writing into d.
func (d *DiskStore) NewBatch() *Batch {
	return &Batch{d: d, ids: make(map[ID]bool)}
}

// Put writes v to a temporary file; it becomes a block of the store at the
// next Commit. A block already held (or already in the batch) is skipped.
func (b *Batch) Put(ctx context.Context, v Verified) error {
	return b.put(ctx, v, b.d.held)
}

// put is Put with held deciding what counts as held already.
func (b *Batch) put(ctx context.Context, v Verified, held func(ID) bool) error {
	d, id := b.d, v.id
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if len(v.data) > MaxBlockSize {
		return fmt.Errorf("put block %s: %d bytes: %w", id.Short(), len(v.data), ErrTooLarge)
	}
	isHeld := held(id)
	b.mu.Lock()
	if b.ids[id] {
		b.mu.Unlock()
		return nil
	}
	b.ids[id] = true
	if isHeld {
		// Nothing to write, but Commit reports it (after an fsync of its
		// directory, in case another writer's name is not durable yet).
		b.pending = append(b.pending, pendingBlock{id: id})
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	undo := func() {
		b.mu.Lock()
		delete(b.ids, id)
		b.mu.Unlock()
	}
	b.mu.Lock()
	inBatch := b.bytes // written, not yet counted by the store
	b.mu.Unlock()
	if err := d.makeRoom(ctx, inBatch+int64(len(v.data))); err != nil {
		undo()
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	tmp, f, err := d.writeTemp(id, v.data)
	if err != nil {
		undo()
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	b.mu.Lock()
	b.pending = append(b.pending, pendingBlock{id: id, tmp: tmp, f: f, size: int64(len(v.data))})
	b.bytes += int64(len(v.data))
	b.mu.Unlock()
	return nil
}

// Len returns how many blocks wait for Commit.
func (b *Batch) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Bytes returns the bytes of the blocks that wait for Commit.
func (b *Batch) Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// take removes and returns the pending blocks.
func (b *Batch) take() []pendingBlock {
	b.mu.Lock()
	defer b.mu.Unlock()
	pend := b.pending
	b.pending = nil
	b.bytes = 0
	for _, p := range pend {
		delete(b.ids, p.id)
	}
	return pend
}

// Commit makes every block Put since the last Commit durable and present,
// as described on Batch, and returns their IDs (including those Put skipped
// because the store held them already). It takes no context: blocks
// written and reported as written must not be dropped because a caller
// gave up. On error none of the blocks not yet renamed is left behind; the
// ones renamed are complete and durable, but their names may not be.
func (b *Batch) Commit() ([]ID, error) {
	pend := b.take()
	if len(pend) == 0 {
		return nil, nil
	}
	d := b.d
	discard := func(ps []pendingBlock) {
		for _, p := range ps {
			if p.f != nil {
				p.f.Close()
			}
			if p.tmp != "" {
				d.removeTemp(p.tmp)
			}
		}
	}
	// 1. The bytes.
	err := parallel(len(pend), func(i int) error {
		if pend[i].f == nil {
			return nil
		}
		if err := d.syncBlock(pend[i].f); err != nil {
			return fmt.Errorf("fsync block %s: %w", pend[i].id.Short(), err)
		}
		return nil
	})
	for i := range pend {
		if pend[i].f == nil {
			continue
		}
		if cerr := pend[i].f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close block %s: %w", pend[i].id.Short(), cerr)
		}
		pend[i].f = nil
	}
	if err != nil {
		discard(pend)
		return nil, fmt.Errorf("commit blocks: %w", err)
	}
	// 2. The names.
	ids := make([]ID, 0, len(pend))
	var dirs []byte
	seen := [256]bool{}
	for i, p := range pend {
		renamed := p.tmp == ""
		if !renamed {
			var err error
			renamed, err = d.install(p.id, p.tmp, p.size)
			if err != nil {
				discard(pend[i+1:])
				return nil, fmt.Errorf("commit blocks: block %s: %w", p.id.Short(), err)
			}
		}
		ids = append(ids, p.id)
		if renamed && !seen[p.id[0]] {
			seen[p.id[0]] = true
			dirs = append(dirs, p.id[0])
		}
	}
	// 3. The directories that hold the names.
	err = parallel(len(dirs), func(i int) error {
		if err := d.syncBlockDir(fanout(dirs[i])); err != nil {
			return fmt.Errorf("fsync directory %s: %w", fanout(dirs[i]), err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("commit blocks: %w", err)
	}
	return ids, nil
}

// Abort removes the temporary files of the blocks not yet committed.
func (b *Batch) Abort() {
	for _, p := range b.take() {
		if p.f != nil {
			p.f.Close()
			b.d.removeTemp(p.tmp)
		}
	}
}

// parallel runs fn(0..n-1) with at most syncParallel at once and returns
// the first error.
func parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	sem := make(chan struct{}, syncParallel)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- fn(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
