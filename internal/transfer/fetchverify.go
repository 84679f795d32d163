package transfer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/multisha"
)

// batchLanes is how many received blocks a fetch gathers before it
// verifies them together: one (each at once) where blocks are hashed one
// at a time anyway.
var batchLanes = func() int {
	if multisha.Accelerated() {
		return multisha.Lanes
	}
	return 1
}()

// arrived is a block as it came from a peer, not yet verified.
type arrived struct {
	p  *peerState
	u  int
	b  *rxBlock
	at time.Time // when it was queued
}

// Bounds on the blocks that wait in the verify queue for a batch: what
// they hold in memory (blocks can be larger than 1 MiB), and how long the
// oldest waits (on a slow link a batch takes long to gather, and hashing
// is not what limits the fetch there).
const (
	maxQueueBytes = 16 << 20
	maxQueueWait  = 50 * time.Millisecond
)

// verifyQueue holds received blocks waiting to be verified together (see
// drain). Its mutex guards its own fields only.
type verifyQueue struct {
	mu    sync.Mutex
	q     []arrived
	bytes int // bytes of the blocks in q
}

// push queues the blocks of got and takes their buffers over (got's
// entries are left without one).
func (v *verifyQueue) push(got []arrived) {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range got {
		got[k].at = now
		v.q = append(v.q, got[k])
		v.bytes += len(got[k].b.data)
		got[k].b = nil
	}
}

// take moves the next batch into batch[:0] and returns it; it returns an
// empty batch while a batch is still gathering. idle: no request is in
// flight, so nothing more is on its way to join the queue.
func (v *verifyQueue) take(idle bool, batch []arrived) []arrived {
	v.mu.Lock()
	defer v.mu.Unlock()
	batch = batch[:0]
	if len(v.q) == 0 || (!idle && len(v.q) < batchLanes && v.bytes < maxQueueBytes && time.Since(v.q[0].at) < maxQueueWait) {
		return batch
	}
	n := min(len(v.q), multisha.Lanes)
	batch = append(batch, v.q[:n]...)
	v.q = append(v.q[:0], v.q[n:]...)
	for _, q := range batch {
		v.bytes -= len(q.b.data)
	}
	return batch
}

// release gives back the buffers of the blocks a failed fetch left queued.
func (v *verifyQueue) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, q := range v.q {
		q.b.release()
	}
	v.q, v.bytes = nil, 0
}

// drain verifies and writes the received blocks queued in the verify
// queue. Hashing (SHA-256 of every block) is most of a receiver's CPU, and
// hashing many blocks at once is about twice as fast where the processor
// allows it (multisha): so blocks wait in the queue until a batch of lanes
// has arrived, or until no request is in flight, when nothing more is on
// its way to join them and whatever is queued goes (or maxQueueBytes are
// waiting, or the oldest has waited maxQueueWait). Every do queues its
// blocks and then drains, so the last request of a lull always empties
// the queue.
func (r *fetch) drain(ctx context.Context) error {
	var (
		batch []arrived
		ids   []blocks.ID
		data  [][]byte
		ok    []blocks.Verified
		errs  []error
	)
	for {
		batch = r.vq.take(r.st.idle(), batch)
		if len(batch) == 0 {
			return r.commit(false)
		}
		n := len(batch)
		ids, data = ids[:0], data[:0]
		for _, q := range batch {
			ids = append(ids, r.st.units[q.u].id) // id is immutable
			data = append(data, q.b.data)
		}
		ok, errs = slices.Grow(ok[:0], n)[:n], slices.Grow(errs[:0], n)[:n]
		blocks.VerifyAll(ids, data, ok, errs)
		for i, q := range batch {
			if err := r.place(ctx, q, ok[i], errs[i]); err != nil {
				for _, q := range batch[i:] {
					q.b.release()
				}
				return err
			}
		}
	}
}

// place writes a block drain verified (v), or penalises the peer that
// sent it if it failed (verr), and gives its buffer back.
func (r *fetch) place(ctx context.Context, q arrived, v blocks.Verified, verr error) error {
	un := &r.st.units[q.u] // id and idx are immutable
	if verr != nil {
		q.b.release()
		r.st.rejected(ctx, q.p, q.u, verr)
		return nil
	}
	if err := r.put(ctx, v); err != nil {
		return fmt.Errorf("store block %s: %w", un.id.Short(), err)
	}
	if err := r.writeOut(un.idx, v.Data()); err != nil {
		return err
	}
	q.b.release()
	if n := r.st.written(q.p, q.u, r.batch == nil); r.prog != nil && n > 0 {
		r.prog.Add(n)
	}
	return nil
}

// put stores a verified block: into the fetch's batch (committed later)
// or straight into a store that does not batch. A file assembled in place
// becomes the store's copy at the end (blocks.Partial.Install).
func (r *fetch) put(ctx context.Context, v blocks.Verified) error {
	if r.part != nil {
		return nil
	}
	if r.batch != nil {
		return r.batch.Put(ctx, v)
	}
	return blocks.PutVerified(ctx, r.store, v)
}
