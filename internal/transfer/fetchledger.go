package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// ledger is a fetch's scheduling state: which distinct blocks are still
// missing, which are in flight, which peer is known to hold which, how
// each peer behaves, and the stats. Its mutex is taken by its own methods
// only. The rest of a fetch is fixed before the workers start (the
// manifest, the destination) or has a lock of its own (the verify queue).
type ledger struct {
	opts FetchOptions
	log  *slog.Logger

	mu sync.Mutex
	// units and peers are fixed in length before the workers start. A
	// unit's id, size and idx, and a peer's idx, target, client and bulk,
	// never change: they are read without mu.
	units        []unit
	peers        []*peerState
	pending      []int // indices into units not yet written
	pos          []int // pos[u]: index of u in pending
	inflight     int
	changed      chan struct{} // closed and replaced on every state change
	lastProgress time.Time
	stats        FetchStats
}

func newLedger(file blocks.ID, opts FetchOptions, log *slog.Logger) *ledger {
	return &ledger{opts: opts, log: log, stats: FetchStats{File: file, Peers: make(map[string]*PeerStats)}}
}

// addPeer adds target as a source (run adds each target once, before
// the workers start).
func (l *ledger) addPeer(target string, client transferpb.BlocksClient, bulk *bulkPeer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := &PeerStats{}
	l.stats.Peers[target] = ps
	l.peers = append(l.peers, &peerState{idx: len(l.peers), target: target, client: client, bulk: bulk, stats: ps, limit: l.opts.PerPeer})
}

// setCounts records the file's size, its distinct blocks and how many of
// them were held at the start.
func (l *ledger) setCounts(size int64, blocks, present int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Size, l.stats.Blocks, l.stats.Present = size, blocks, present
}

// counts returns the file's distinct blocks and how many were held at the
// start.
func (l *ledger) counts() (blocks, present int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats.Blocks, l.stats.Present
}

func (l *ledger) setManifestFrom(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.ManifestFrom = target
}

// start takes the missing units (every one pending) and arms the wake-ups
// and the give-up clock: called once, before the workers start.
func (l *ledger) start(units []unit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.units = units
	l.pending = make([]int, len(units))
	l.pos = make([]int, len(units))
	for u := range units {
		l.pending[u], l.pos[u] = u, u
	}
	for _, p := range l.peers {
		p.has = make([]bool, len(units))
	}
	l.changed = make(chan struct{})
	l.lastProgress = time.Now()
}

// snapshot copies the stats, with the duration since start.
func (l *ledger) snapshot(start time.Time) FetchStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Duration = time.Since(start)
	stats := l.stats
	stats.Peers = make(map[string]*PeerStats, len(l.stats.Peers))
	for t, ps := range l.stats.Peers {
		c := *ps
		stats.Peers[t] = &c
	}
	return stats
}

// signalLocked wakes the workers waiting for a state change.
func (l *ledger) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// question asks one peer about the units it is not known to hold.
type question struct {
	p     *peerState
	units []int
}

// questions returns what to ask every live peer at a refresh.
func (l *ledger) questions() []question {
	l.mu.Lock()
	defer l.mu.Unlock()
	var qs []question
	for _, p := range l.peers {
		if !p.live() {
			continue
		}
		q := question{p: p}
		for _, u := range l.pending {
			if !p.has[u] {
				q.units = append(q.units, u)
			}
		}
		if len(q.units) > 0 {
			qs = append(qs, q)
		}
	}
	return qs
}

// answered records a peer's answer to q (has, or the request's error err;
// rctx is the request's context, ctx the refresh's).
func (l *ledger) answered(ctx, rctx context.Context, q question, has []bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if !ended(ctx) {
			l.log.Debug("have failed", "peer", q.p.target, "err", err)
			l.penaliseLocked(rctx, q.p, err)
			l.signalLocked()
		}
		return
	}
	learned := 0
	for i, u := range q.units {
		if has[i] && !q.p.has[u] && !l.units[u].written {
			q.p.has[u] = true
			l.units[u].holders = append(l.units[u].holders, q.p.idx)
			learned++
		}
	}
	if learned > 0 {
		l.signalLocked()
	}
}

// next waits for a job: a missing block not in flight and a ready peer
// known to hold it. It returns nil when every block is written.
func (l *ledger) next(ctx context.Context) (*job, error) {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.mu.Unlock()
			return nil, nil
		}
		now := time.Now()
		j, wake := l.pickLocked(now)
		if j != nil {
			l.mu.Unlock()
			return j, nil
		}
		if l.inflight == 0 {
			live := 0
			for _, p := range l.peers {
				if p.live() {
					live++
				}
			}
			if live == 0 {
				l.mu.Unlock()
				return nil, fmt.Errorf("%d blocks missing, every peer banned or unreachable: %w", len(l.pending), ErrNoHolder)
			}
			if now.Sub(l.lastProgress) > l.opts.GiveUp {
				l.mu.Unlock()
				return nil, fmt.Errorf("%d blocks missing, no progress for %v: %w", len(l.pending), l.opts.GiveUp, ErrNoHolder)
			}
		}
		changed := l.changed
		l.mu.Unlock()

		d := 250 * time.Millisecond
		if !wake.IsZero() {
			d = min(d, max(wake.Sub(now), time.Millisecond))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// pickLocked chooses a random pending block that is not in flight and has
// a ready holder, and a random ready holder for it; then adds to the
// request other blocks that holder has, up to BatchBytes. With no job to
// give, it returns the earliest time a cooling-down holder becomes ready
// (zero if none).
func (l *ledger) pickLocked(now time.Time) (*job, time.Time) {
	var wake time.Time
	// Without a ready peer there is nothing to scan for (the scan is
	// linear in the pending blocks).
	anyReady := false
	for _, p := range l.peers {
		if p.ready(now) {
			anyReady = true
			break
		}
		if p.live() && p.inflight < p.limit && (wake.IsZero() || p.cooldown.Before(wake)) {
			wake = p.cooldown
		}
	}
	if !anyReady {
		return nil, wake
	}
	wake = time.Time{}
	n := len(l.pending)
	start := rand.IntN(n)
	var cands []*peerState
	for k := range n {
		u := l.pending[(start+k)%n]
		un := &l.units[u]
		if un.busy {
			continue
		}
		cands = cands[:0]
		for _, pi := range un.holders {
			p := l.peers[pi]
			if p.ready(now) {
				cands = append(cands, p)
			} else if p.live() && p.inflight < p.limit && (wake.IsZero() || p.cooldown.Before(wake)) {
				wake = p.cooldown
			}
		}
		if len(cands) == 0 {
			continue
		}
		p := cands[rand.IntN(len(cands))]
		j := &job{peer: p, units: []int{u}}
		bytes := un.size
		for k2 := k + 1; k2 < n && len(j.units) < MaxGetIDs; k2++ {
			u2 := l.pending[(start+k2)%n]
			if l.units[u2].busy || !p.has[u2] {
				continue
			}
			if bytes+l.units[u2].size > l.opts.BatchBytes {
				break
			}
			bytes += l.units[u2].size
			j.units = append(j.units, u2)
		}
		for _, u := range j.units {
			l.units[u].busy = true
		}
		p.inflight++
		l.inflight++
		p.stats.Requests++
		return j, time.Time{}
	}
	return nil, wake
}

// requestDone frees j's peer slot once its answers are in: the first
// answered units stay busy (they await verification), the rest go back to
// the pool. err is the request's error (rctx its context, ctx the fetch's).
func (l *ledger) requestDone(ctx, rctx context.Context, j *job, answered int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := j.peer
	for _, u := range j.units[answered:] {
		l.units[u].busy = false
	}
	p.inflight--
	l.inflight--
	switch {
	case ended(ctx):
	case err != nil:
		l.penaliseLocked(rctx, p, err)
	default:
		p.failures = 0
		p.limit = min(l.opts.PerPeer, p.limit+1)
	}
	l.signalLocked()
}

// rejected records that p's copy of unit u failed verification: p is
// banned and u goes back to the pool.
func (l *ledger) rejected(ctx context.Context, p *peerState, u int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.penaliseLocked(ctx, p, fmt.Errorf("%w: %w", errBadBlock, err))
	l.units[u].busy = false
	l.signalLocked()
}

// written records that p delivered unit u and that it has been written:
// it is no longer pending. With done (no batch to commit) it is also done;
// the bytes of the file it fills are returned, for progress.
func (l *ledger) written(p *peerState, u int, done bool) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	un := &l.units[u]
	un.written = true
	un.busy = false
	// Swap-remove u from pending.
	i, last := l.pos[u], len(l.pending)-1
	l.pending[i] = l.pending[last]
	l.pos[l.pending[i]] = i
	l.pending = l.pending[:last]
	p.stats.Blocks++
	p.stats.Bytes += int64(un.size)
	l.lastProgress = time.Now()
	var n int64
	if done {
		n = l.doneLocked(u)
	}
	l.signalLocked()
	return n
}

// committed records that the store made units durable; it returns the
// bytes of the file they fill, for progress.
func (l *ledger) committed(units []int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, u := range units {
		if !l.units[u].done {
			n += l.doneLocked(u)
		}
	}
	return n
}

func (l *ledger) doneLocked(u int) int64 {
	un := &l.units[u]
	un.done = true
	l.stats.Fetched++
	l.stats.FetchedBytes += int64(un.size)
	return int64(un.size) * int64(len(un.idx))
}

// notFound records that p no longer holds unit u.
func (l *ledger) notFound(p *peerState, u int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p.stats.NotFound++
	if p.has[u] {
		p.has[u] = false
		l.units[u].holders = slices.DeleteFunc(l.units[u].holders, func(pi int) bool { return pi == p.idx })
	}
	l.units[u].busy = false
}

// penalise is penaliseLocked for a request outside the block scheduling
// (the manifest).
func (l *ledger) penalise(rctx context.Context, p *peerState, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.penaliseLocked(rctx, p, err)
}

// penaliseLocked scores a failed request to p: bad data bans the peer for
// the fetch; a timeout halves its request bound and cools it down; any
// failure cools it down exponentially, and MaxPeerFailures in a row drop
// it. rctx is the failed request's own context.
func (l *ledger) penaliseLocked(rctx context.Context, p *peerState, err error) {
	log := l.log.With("peer", p.target, "err", err)
	bad := errors.Is(err, errBadBlock) || errors.Is(err, ErrProtocol) ||
		errors.Is(err, blocks.ErrCorrupt) || errors.Is(err, blocks.ErrTooLarge) ||
		status.Code(err) == codes.ResourceExhausted
	if bad {
		p.stats.Corrupt++
		if !p.banned {
			p.banned = true
			p.stats.Banned = true
			log.Warn("peer served bad data; banned for this fetch")
		}
		return
	}
	p.stats.Failures++
	p.failures++
	if errors.Is(rctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		p.stats.Timeouts++
		p.limit = max(1, p.limit/2)
		log.Info("peer timed out; deprioritised", "limit", p.limit)
	} else {
		log.Info("peer request failed", "failures", p.failures)
	}
	p.cooldown = time.Now().Add(min(100*time.Millisecond<<min(p.failures-1, 6), 5*time.Second))
	if p.failures >= l.opts.MaxPeerFailures && !p.dropped {
		p.dropped = true
		p.stats.Dropped = true
		log.Warn("peer failed too often; dropped from this fetch", "failures", p.failures)
	}
}
