package transfer

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// unit is one distinct missing block. It is pending until a peer's copy
// has been verified and written (to the store, to FetchFile's output),
// then done once the store has committed it. id, size and idx never
// change; the rest is the ledger's, guarded by its mutex.
type unit struct {
	id      blocks.ID
	size    int
	idx     []int // its positions in the manifest
	busy    bool
	written bool
	done    bool
	holders []int // peers known to hold it
}

// peerState is one source of a fetch. idx, target, client and bulk never
// change; the rest is the ledger's, guarded by its mutex.
type peerState struct {
	idx      int
	target   string
	client   transferpb.BlocksClient
	bulk     *bulkPeer // nil with NoBulk
	stats    *PeerStats
	has      []bool // has[u]: known to hold units[u]
	inflight int
	limit    int // current bound on inflight, 1..PerPeer
	failures int // consecutive
	cooldown time.Time
	banned   bool
	dropped  bool
}

func (p *peerState) live() bool { return !p.banned && !p.dropped }

func (p *peerState) ready(now time.Time) bool {
	return p.live() && p.inflight < p.limit && !now.Before(p.cooldown)
}

// job is one Get request: units asked of one peer.
type job struct {
	peer  *peerState
	units []int
}

// refresh asks every live peer which of the still-missing blocks it holds
// (only about the blocks it is not yet known to hold).
func (r *fetch) refresh(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(r.opts.Concurrency)
	for _, q := range r.st.questions() {
		g.Go(func() error {
			ids := make([]blocks.ID, len(q.units))
			for i, u := range q.units {
				ids[i] = r.st.units[u].id // immutable
			}
			rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
			defer cancel()
			has, md, err := haveHeader(rctx, q.p.client, ids)
			if err == nil {
				q.p.bulk.advertised(md)
			}
			r.st.answered(ctx, rctx, q, has, err)
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail
}

// get reads the answers to a Get of ids from p: over the bulk path when p
// offers it, else (or if it cannot be opened) over gRPC. See getStream.
func (r *fetch) get(ctx context.Context, p *peerState, ids []blocks.ID, fn func(i int, b *rxBlock) (bool, error)) error {
	if p.bulk.usable() {
		err := p.bulk.get(ctx, ids, fn)
		if !errors.Is(err, errBulkUnavailable) {
			return err
		}
		r.log.Info("bulk path unavailable; using gRPC", "peer", p.target, "err", err)
	}
	return getStream(ctx, p.client, ids, fn)
}

// ended reports whether ctx is done or its deadline has passed. A
// request's context shares its parent's deadline and may notice it first:
// a request cut short by the end of the whole fetch is not the peer's
// fault.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
