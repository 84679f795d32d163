package transfer

import (
	"context"
	"fmt"

	"github.com/p2pc/p2pc/internal/blocks"
)

// arrived is a block as it came from a peer, not yet verified.
type arrived struct {
	p *peerState
	u int
	b *rxBlock
}

// verify checks each received block against its ID (SHA-256, by the
// worker that received it: the workers run in parallel, so hashing spreads
// over the cores) and places it. A buffer place has taken is cleared from
// got; on a local failure the rest are left for the caller to release.
// Then it commits the written blocks if CommitBytes are waiting.
func (r *fetch) verify(ctx context.Context, got []arrived) error {
	for k := range got {
		q := got[k]
		v, verr := blocks.Verify(r.st.units[q.u].id, q.b.data) // id is immutable
		if err := r.place(ctx, q, v, verr); err != nil {
			return err
		}
		got[k].b = nil
	}
	return r.commit(false)
}

// place writes a block that passed verification (v), or penalises the peer that
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
