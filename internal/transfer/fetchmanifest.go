package transfer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
)

// manifest returns the file's manifest, from the local store or else from
// the first peer (in random order) that serves a valid one.
func (r *fetch) manifest(ctx context.Context, file blocks.ID) (*blocks.Manifest, error) {
	data, err := r.store.Get(ctx, file)
	switch {
	case err == nil:
		m, err := blocks.DecodeManifest(data)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w: %w", file.Short(), ErrNotManifest, err)
		}
		return m, nil
	case errors.Is(err, blocks.ErrNotFound), errors.Is(err, blocks.ErrCorrupt):
	default:
		return nil, fmt.Errorf("manifest %s: %w", file.Short(), err)
	}

	deadline := time.Now().Add(r.opts.GiveUp)
	backoff := 100 * time.Millisecond
	for {
		live := 0
		for _, i := range rand.Perm(len(r.st.peers)) {
			p := r.st.peers[i] // the workers do not run yet: no other writer
			if !p.live() {
				continue
			}
			live++
			m, err := r.manifestFrom(ctx, p, file)
			if err == nil {
				return m, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrNotManifest) {
				return nil, err
			}
		}
		if live == 0 || time.Now().After(deadline) {
			return nil, fmt.Errorf("manifest %s: %w", file.Short(), ErrNoHolder)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (r *fetch) manifestFrom(ctx context.Context, p *peerState, file blocks.ID) (*blocks.Manifest, error) {
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	var m *blocks.Manifest
	var notManifest, local error
	err := getStream(rctx, p.client, []blocks.ID{file}, func(_ int, b *rxBlock) (bool, error) {
		if b == nil {
			return false, fmt.Errorf("manifest %s: %w", file.Short(), blocks.ErrNotFound)
		}
		v, err := blocks.Verify(file, b.data)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errBadBlock, err)
		}
		if m, err = blocks.DecodeManifest(b.data); err != nil {
			// The bytes hash to the ID asked: the ID itself is wrong.
			notManifest = fmt.Errorf("manifest %s: %w: %w", file.Short(), ErrNotManifest, err)
			return false, notManifest
		}
		if err := blocks.PutVerified(ctx, r.store, v); err != nil {
			local = fmt.Errorf("store manifest %s: %w", file.Short(), err)
			return false, local
		}
		return false, nil
	})
	if notManifest != nil {
		return nil, notManifest
	}
	if local != nil {
		return nil, local
	}
	if err != nil {
		if !ended(ctx) && !errors.Is(err, blocks.ErrNotFound) {
			r.st.penalise(rctx, p, err)
		}
		r.log.Debug("manifest not from peer", "peer", p.target, "err", err)
		return nil, err
	}
	r.st.setManifestFrom(p.target)
	return m, nil
}

// plan works out which distinct blocks of m are missing locally: not
// held by the store and, when assembling in place, not found verified in
// the partial file at some position (a block in place at one position is
// copied to the others, as is a block the store holds).
func (r *fetch) plan(ctx context.Context, m *blocks.Manifest) error {
	index := make(map[blocks.ID]int, len(m.Blocks)) // missing: unit index
	held := make(map[blocks.ID]bool)
	if r.part != nil {
		r.fromPos = make(map[blocks.ID]int)
		for i, id := range m.Blocks {
			if _, ok := r.fromPos[id]; !ok && r.part.InPlace(i) {
				r.fromPos[id] = i
				held[id] = true
			}
		}
	}
	var present int64
	var units []unit
	for i, id := range m.Blocks {
		size := m.BlockLen(i)
		if r.part != nil && r.part.InPlace(i) {
			present += int64(size)
			continue
		}
		if u, ok := index[id]; ok {
			units[u].idx = append(units[u].idx, i)
			continue
		}
		if held[id] {
			present += int64(size)
			r.heldIdx = append(r.heldIdx, i)
			continue
		}
		has, err := r.store.Has(ctx, id)
		if err != nil {
			return fmt.Errorf("check block %s: %w", id.Short(), err)
		}
		if has {
			held[id] = true
			present += int64(size)
			r.heldIdx = append(r.heldIdx, i)
			continue
		}
		index[id] = len(units)
		units = append(units, unit{id: id, size: size, idx: []int{i}})
	}
	r.unitOf = index
	r.st.setCounts(m.Size, len(held)+len(units), len(held))
	r.st.start(units)
	if r.prog != nil {
		if t, ok := r.prog.(ProgressTotal); ok {
			t.SetTotal(m.Size)
		}
		if present > 0 {
			r.prog.Add(present)
		}
	}
	return nil
}
