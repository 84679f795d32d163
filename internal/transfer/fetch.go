package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/multisha"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// ErrNoHolder is wrapped by the error of a fetch that cannot finish
// because no usable peer holds a block it needs (every holder is banned,
// unreachable, or there never was one) for FetchOptions.GiveUp.
var ErrNoHolder = errors.New("no usable peer holds the block")

// ErrNotManifest: the file ID names a block that is not a manifest.
var ErrNotManifest = errors.New("block is not a file manifest")

// errBadBlock marks an answer that fails verification: wrong length,
// wrong hash, oversized. The peer that sent it is banned for the fetch.
var errBadBlock = errors.New("bad block")

// Progress is told how far a fetch has come, in bytes of the file that
// are in place (already held or fetched and verified).
type Progress interface {
	Add(n int64)
}

// ProgressTotal may be implemented by a Progress that wants the file's
// size: Fetch calls SetTotal once the manifest is known, before any Add.
type ProgressTotal interface {
	SetTotal(n int64)
}

// FetchOptions tune a Fetcher. Zero fields take the defaults shown.
type FetchOptions struct {
	// Concurrency bounds the Get requests in flight in total (16).
	Concurrency int
	// PerPeer bounds the Get requests in flight to one peer (4). A peer
	// that times out has its own bound halved, down to 1, and regains it
	// one success at a time.
	PerPeer int
	// RequestTimeout is the deadline of one request (30s). A peer that
	// misses it is deprioritised and the blocks asked of it retried.
	RequestTimeout time.Duration
	// RefreshInterval is how often peers are asked again which missing
	// blocks they hold (2s), so that blocks a peer fetched meanwhile can
	// be taken from it.
	RefreshInterval time.Duration
	// GiveUp is how long a fetch waits without progress, with nothing in
	// flight, before failing with ErrNoHolder (30s).
	GiveUp time.Duration
	// MaxPeerFailures consecutive errors or timeouts drop a peer from the
	// fetch (5).
	MaxPeerFailures int
	// BatchBytes is the most block bytes asked in one Get (1 MiB): files
	// cut into small blocks are fetched several blocks per request.
	BatchBytes int
	// CommitBytes is how many bytes of fetched blocks a store that batches
	// (blocks.DiskStore) writes before making them durable in one pass
	// (32 MiB): see blocks.Batch. Blocks count as fetched, and progress
	// is reported, once committed. A fetch that is killed re-fetches at
	// most about this much.
	CommitBytes int
	// CommitInterval is the longest fetched blocks wait to be committed
	// (1s), for slow transfers that take long to fill CommitBytes.
	CommitInterval time.Duration
	// NoBulk keeps block data on gRPC even with peers that offer the
	// bulk path (see "Bulk path" in the package documentation).
	NoBulk bool
	// Logger receives the fetcher's logs; nil means slog.Default().
	Logger *slog.Logger
}

func (o FetchOptions) withDefaults() FetchOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.PerPeer <= 0 {
		o.PerPeer = 4
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 2 * time.Second
	}
	if o.GiveUp <= 0 {
		o.GiveUp = 30 * time.Second
	}
	if o.MaxPeerFailures <= 0 {
		o.MaxPeerFailures = 5
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
	if o.CommitBytes <= 0 {
		o.CommitBytes = 32 << 20
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// FetchStats describe one fetch. Block counts are of distinct blocks: a
// block that occurs twice in a file is fetched once.
type FetchStats struct {
	File blocks.ID `json:"file"`
	Size int64     `json:"size"`
	// Blocks is the number of distinct blocks in the file.
	Blocks int `json:"blocks"`
	// Present is how many were already held when the fetch started.
	Present int `json:"present"`
	// Fetched is how many were received, verified and stored by this
	// fetch; FetchedBytes their length.
	Fetched      int   `json:"fetched"`
	FetchedBytes int64 `json:"fetched_bytes"`
	// ManifestFrom is the peer the manifest came from ("" if held).
	ManifestFrom string        `json:"manifest_from,omitempty"`
	Duration     time.Duration `json:"duration_ns"`
	// Peers holds one entry per peer given to Fetch, keyed by target.
	Peers map[string]*PeerStats `json:"peers"`
}

// PeerStats describe what one peer did during a fetch.
type PeerStats struct {
	Blocks   int   `json:"blocks"`    // blocks it served that were accepted
	Bytes    int64 `json:"bytes"`     // their bytes
	Requests int   `json:"requests"`  // Get requests sent to it
	Failures int   `json:"failures"`  // requests (Get or Have) that failed or timed out
	Timeouts int   `json:"timeouts"`  // of those, how many timed out
	Corrupt  int   `json:"corrupt"`   // answers that failed verification
	NotFound int   `json:"not_found"` // blocks it answered NOT_FOUND
	Banned   bool  `json:"banned"`    // served bad data: not asked again
	Dropped  bool  `json:"dropped"`   // failed MaxPeerFailures times in a row
}

// Fetcher fetches files, block by block, from the peers that hold them
// into a local store. One Fetcher may run several fetches at once.
type Fetcher struct {
	store blocks.Store
	pool  *Pool
	opts  FetchOptions
	log   *slog.Logger
}

// NewFetcher returns a Fetcher that stores into store and reaches peers
// through pool.
func NewFetcher(store blocks.Store, pool *Pool, opts FetchOptions) *Fetcher {
	opts = opts.withDefaults()
	return &Fetcher{store: store, pool: pool, opts: opts, log: opts.Logger.With("component", "transfer.fetch")}
}

// Fetch makes the local store hold the file whose ID is file: its
// manifest block and every block the manifest lists. It asks the peers
// (gRPC targets) which blocks they hold, then requests each missing block
// from a random holder, verifies it and stores it. Blocks already held are
// not fetched again, so a fetch that was killed resumes where it stopped.
// p may be nil. The stats are returned even when the fetch fails.
func (f *Fetcher) Fetch(ctx context.Context, file blocks.ID, peers []string, p Progress) (*FetchStats, error) {
	r := f.newFetch(file, p)
	return f.finish(r, r.run(ctx, file, peers))
}

func (f *Fetcher) newFetch(file blocks.ID, p Progress) *fetch {
	return &fetch{
		f:     f,
		opts:  f.opts,
		log:   f.log.With("file", file.Short()),
		store: f.store,
		prog:  p,
		start: time.Now(),
		stats: FetchStats{File: file, Peers: make(map[string]*PeerStats)},
	}
}

// batchLanes is how many received blocks a fetch gathers before it
// verifies them together: one (each at once) where blocks are hashed one
// at a time anyway.
var batchLanes = func() int {
	if multisha.Accelerated() {
		return multisha.Lanes
	}
	return 1
}()

// finish snapshots the stats of a fetch that has returned err.
func (f *Fetcher) finish(r *fetch, err error) (*FetchStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Duration = time.Since(r.start)
	stats := r.stats
	stats.Peers = make(map[string]*PeerStats, len(r.stats.Peers))
	for t, ps := range r.stats.Peers {
		c := *ps
		stats.Peers[t] = &c
	}
	if err != nil {
		return &stats, fmt.Errorf("fetch %s: %w", stats.File.Short(), err)
	}
	return &stats, nil
}

// fetch is the state of one Fetch call.
type fetch struct {
	f     *Fetcher
	opts  FetchOptions
	log   *slog.Logger
	store blocks.Store
	prog  Progress
	start time.Time

	peers   []*peerState // fixed after run starts; fields guarded by mu
	units   []unit       // distinct blocks still missing at the start
	unitOf  map[blocks.ID]int
	m       *blocks.Manifest
	heldIdx []int         // manifest positions of the blocks held at the start
	out     *os.File      // FetchFile's destination (temporary name), or nil
	batch   *blocks.Batch // blocks written but not yet committed, if the store batches
	inPlace *blocks.DiskStore
	part    *blocks.Partial // with inPlace: the file being assembled in the store
	fromPos map[blocks.ID]int

	// Received blocks waiting to be verified together; see drain.
	vmu     sync.Mutex
	vq      []arrived
	vqBytes int // bytes of the blocks in vq

	mu           sync.Mutex
	pending      []int // indices into units not yet done
	pos          []int // pos[u]: index of u in pending
	inflight     int
	changed      chan struct{} // closed and replaced on every state change
	lastProgress time.Time
	stats        FetchStats
}

// unit is one distinct missing block. It is pending until a peer's copy
// has been verified and written (to the store, to FetchFile's output),
// then done once the store has committed it.
type unit struct {
	id      blocks.ID
	size    int
	idx     []int // its positions in the manifest
	busy    bool
	written bool
	done    bool
	holders []int // peers known to hold it
}

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

func (r *fetch) run(ctx context.Context, file blocks.ID, targets []string) error {
	for _, t := range targets {
		if _, dup := r.stats.Peers[t]; dup || t == "" {
			continue
		}
		c, err := r.f.pool.Blocks(t)
		if err != nil {
			return err
		}
		ps := &PeerStats{}
		r.stats.Peers[t] = ps
		var bulk *bulkPeer
		if !r.opts.NoBulk {
			bulk = r.f.pool.bulkPeer(t)
		}
		r.peers = append(r.peers, &peerState{idx: len(r.peers), target: t, client: c, bulk: bulk, stats: ps, limit: r.opts.PerPeer})
	}

	m, err := r.manifest(ctx, file)
	if err != nil {
		return err
	}
	r.m = m
	if r.inPlace != nil {
		if r.part, err = r.inPlace.OpenPartial(ctx, file, m); err != nil {
			return fmt.Errorf("write file: %w", err)
		}
		r.out = r.part.File()
	}
	if err := r.plan(ctx, m); err != nil {
		return err
	}
	if r.out != nil && r.part == nil {
		if err := r.out.Truncate(m.Size); err != nil {
			return fmt.Errorf("write file: %w", err)
		}
	}
	if len(r.units) == 0 {
		return nil
	}
	if len(r.peers) == 0 {
		return fmt.Errorf("%d blocks missing and no peers given: %w", len(r.units), ErrNoHolder)
	}
	r.log.Info("fetching", "blocks", r.stats.Blocks, "present", r.stats.Present, "missing", len(r.units), "peers", len(r.peers))

	if b, ok := r.store.(interface{ NewBatch() *blocks.Batch }); ok && r.part == nil {
		r.batch = b.NewBatch()
	}
	r.mu.Lock()
	r.changed = make(chan struct{})
	r.lastProgress = time.Now()
	r.mu.Unlock()
	r.refresh(ctx)

	cctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	workers, wctx := errgroup.WithContext(cctx)
	workers.SetLimit(r.opts.Concurrency)
	refreshCtx, stopRefresh := context.WithCancel(wctx)
	var bg errgroup.Group
	bg.Go(func() error {
		t := time.NewTicker(r.opts.RefreshInterval)
		defer t.Stop()
		for {
			select {
			case <-refreshCtx.Done():
				return nil
			case <-t.C:
				r.refresh(refreshCtx)
			}
		}
	})
	stopCommits := make(chan struct{})
	if r.batch != nil {
		bg.Go(func() error {
			t := time.NewTicker(r.opts.CommitInterval)
			defer t.Stop()
			for {
				select {
				case <-stopCommits:
					return nil
				case <-t.C:
					if err := r.commit(true); err != nil {
						fail(err)
						return nil
					}
				}
			}
		})
	}
	for range r.opts.Concurrency {
		workers.Go(func() error { return r.worker(wctx) })
	}
	err = workers.Wait()
	r.releaseQueued()
	stopRefresh()
	close(stopCommits)
	_ = bg.Wait() // the refresher only logs; the committer reports through fail
	if cause := context.Cause(cctx); err != nil && ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err == nil {
		err = r.commit(true)
	}
	if err != nil {
		if r.batch != nil {
			r.batch.Abort()
		}
		return err
	}
	return nil
}

// commit makes the blocks written so far durable in the store (if it
// batches), then counts them as fetched: state after data. Without force
// it commits only once CommitBytes are waiting.
func (r *fetch) commit(force bool) error {
	if r.batch == nil {
		return nil
	}
	if !force && r.batch.Bytes() < int64(r.opts.CommitBytes) {
		return nil
	}
	ids, err := r.batch.Commit()
	if err != nil {
		return fmt.Errorf("store blocks: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	var n int64
	r.mu.Lock()
	for _, id := range ids {
		u, ok := r.unitOf[id]
		if !ok || r.units[u].done {
			continue
		}
		un := &r.units[u]
		un.done = true
		r.stats.Fetched++
		r.stats.FetchedBytes += int64(un.size)
		n += int64(un.size) * int64(len(un.idx))
	}
	r.mu.Unlock()
	if r.prog != nil && n > 0 {
		r.prog.Add(n)
	}
	return nil
}

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
		for _, i := range rand.Perm(len(r.peers)) {
			p := r.peers[i]
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
			r.mu.Lock()
			r.penalise(rctx, p, err)
			r.mu.Unlock()
		}
		r.log.Debug("manifest not from peer", "peer", p.target, "err", err)
		return nil, err
	}
	r.mu.Lock()
	r.stats.ManifestFrom = p.target
	r.mu.Unlock()
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
	for i, id := range m.Blocks {
		size := m.BlockLen(i)
		if r.part != nil && r.part.InPlace(i) {
			present += int64(size)
			continue
		}
		if u, ok := index[id]; ok {
			r.units[u].idx = append(r.units[u].idx, i)
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
		index[id] = len(r.units)
		r.units = append(r.units, unit{id: id, size: size, idx: []int{i}})
	}
	r.unitOf = index
	r.mu.Lock()
	r.stats.Size = m.Size
	r.stats.Blocks = len(held) + len(r.units)
	r.stats.Present = len(held)
	r.pending = make([]int, len(r.units))
	r.pos = make([]int, len(r.units))
	for u := range r.units {
		r.pending[u], r.pos[u] = u, u
	}
	for _, p := range r.peers {
		p.has = make([]bool, len(r.units))
	}
	r.mu.Unlock()
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

// signal wakes the workers waiting for a state change. Called with mu held.
func (r *fetch) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// refresh asks every live peer which of the still-missing blocks it holds
// (only about the blocks it is not yet known to hold).
func (r *fetch) refresh(ctx context.Context) {
	type question struct {
		p     *peerState
		units []int
	}
	var qs []question
	r.mu.Lock()
	for _, p := range r.peers {
		if !p.live() {
			continue
		}
		q := question{p: p}
		for _, u := range r.pending {
			if !p.has[u] {
				q.units = append(q.units, u)
			}
		}
		if len(q.units) > 0 {
			qs = append(qs, q)
		}
	}
	r.mu.Unlock()

	var g errgroup.Group
	g.SetLimit(r.opts.Concurrency)
	for _, q := range qs {
		g.Go(func() error {
			ids := make([]blocks.ID, len(q.units))
			for i, u := range q.units {
				ids[i] = r.units[u].id
			}
			rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
			defer cancel()
			has, md, err := haveHeader(rctx, q.p.client, ids)
			if err == nil {
				q.p.bulk.advertised(md)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				if !ended(ctx) {
					r.log.Debug("have failed", "peer", q.p.target, "err", err)
					r.penalise(rctx, q.p, err)
					r.signal()
				}
				return nil
			}
			learned := 0
			for i, u := range q.units {
				if has[i] && !q.p.has[u] && !r.units[u].written {
					q.p.has[u] = true
					r.units[u].holders = append(r.units[u].holders, q.p.idx)
					learned++
				}
			}
			if learned > 0 {
				r.signal()
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail
}

// job is one Get request: units asked of one peer.
type job struct {
	peer  *peerState
	units []int
}

func (r *fetch) worker(ctx context.Context) error {
	for {
		j, err := r.next(ctx)
		if err != nil || j == nil {
			return err
		}
		if err := r.do(ctx, j); err != nil {
			return err
		}
	}
}

// next waits for a job: a missing block not in flight and a ready peer
// known to hold it. It returns nil when every block is done.
func (r *fetch) next(ctx context.Context) (*job, error) {
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.mu.Unlock()
			return nil, nil
		}
		now := time.Now()
		j, wake := r.pick(now)
		if j != nil {
			r.mu.Unlock()
			return j, nil
		}
		if r.inflight == 0 {
			live := 0
			for _, p := range r.peers {
				if p.live() {
					live++
				}
			}
			if live == 0 {
				r.mu.Unlock()
				return nil, fmt.Errorf("%d blocks missing, every peer banned or unreachable: %w", len(r.pending), ErrNoHolder)
			}
			if now.Sub(r.lastProgress) > r.opts.GiveUp {
				r.mu.Unlock()
				return nil, fmt.Errorf("%d blocks missing, no progress for %v: %w", len(r.pending), r.opts.GiveUp, ErrNoHolder)
			}
		}
		changed := r.changed
		r.mu.Unlock()

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

// pick chooses a random pending block that is not in flight and has a
// ready holder, and a random ready holder for it; then adds to the
// request other blocks that holder has, up to BatchBytes. With no job to
// give, it returns the earliest time a cooling-down holder becomes ready
// (zero if none). Called with mu held.
func (r *fetch) pick(now time.Time) (*job, time.Time) {
	var wake time.Time
	// Without a ready peer there is nothing to scan for (the scan is
	// linear in the pending blocks).
	anyReady := false
	for _, p := range r.peers {
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
	n := len(r.pending)
	start := rand.IntN(n)
	var cands []*peerState
	for k := range n {
		u := r.pending[(start+k)%n]
		un := &r.units[u]
		if un.busy {
			continue
		}
		cands = cands[:0]
		for _, pi := range un.holders {
			p := r.peers[pi]
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
			u2 := r.pending[(start+k2)%n]
			if r.units[u2].busy || !p.has[u2] {
				continue
			}
			if bytes+r.units[u2].size > r.opts.BatchBytes {
				break
			}
			bytes += r.units[u2].size
			j.units = append(j.units, u2)
		}
		for _, u := range j.units {
			r.units[u].busy = true
		}
		p.inflight++
		r.inflight++
		p.stats.Requests++
		return j, time.Time{}
	}
	return nil, wake
}

// do sends one job's request and handles the answers. The peer's slot is
// freed as soon as the answers are in; each block is then verified (hashed)
// once, and written, outside it (drain, which may batch it with blocks of
// other requests), so that neither the hashing nor a slow disk idles the
// network: Concurrency bounds the requests and the writes together,
// PerPeer only the requests. The store trusts that one check. A block
// that fails it bans the peer and goes back to the pool; the others are
// kept, each verified on its own. Only a local failure (the store, the
// output file) is returned: peer trouble is dealt with here.
func (r *fetch) do(ctx context.Context, j *job) error {
	p := j.peer
	ids := make([]blocks.ID, len(j.units))
	for i, u := range j.units {
		ids[i] = r.units[u].id
	}
	var got []arrived
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	answered := 0
	err := r.get(rctx, p, ids, func(i int, b *rxBlock) (bool, error) {
		u := j.units[i]
		un := &r.units[u] // id and size are immutable
		if b == nil {
			r.notFound(p, u)
			answered++
			return false, nil
		}
		if len(b.data) != un.size {
			return false, fmt.Errorf("%w: block %s: %d bytes, manifest says %d", errBadBlock, un.id.Short(), len(b.data), un.size)
		}
		got = append(got, arrived{p: p, u: u, b: b})
		answered++
		return true, nil
	})
	defer func() {
		for _, g := range got {
			if g.b != nil {
				g.b.release()
			}
		}
	}()

	r.mu.Lock()
	for _, u := range j.units[answered:] {
		r.units[u].busy = false
	}
	p.inflight--
	r.inflight--
	switch {
	case ended(ctx):
	case err != nil:
		r.penalise(rctx, p, err)
	default:
		p.failures = 0
		p.limit = min(r.opts.PerPeer, p.limit+1)
	}
	r.signal()
	r.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	now := time.Now()
	r.vmu.Lock()
	for k := range got {
		got[k].at = now
		r.vq = append(r.vq, got[k])
		r.vqBytes += len(got[k].b.data)
		got[k].b = nil
	}
	r.vmu.Unlock()
	return r.drain(ctx)
}

// arrived is a block as it came from a peer, not yet verified.
type arrived struct {
	p  *peerState
	u  int
	b  *rxBlock
	at time.Time // when it was queued
}

// Bounds on the blocks that wait in vq for a batch: what they hold in
// memory (blocks can be larger than 1 MiB), and how long the oldest waits
// (on a slow link a batch takes long to gather, and hashing is not what
// limits the fetch there).
const (
	maxQueueBytes = 16 << 20
	maxQueueWait  = 50 * time.Millisecond
)

// drain verifies and writes the received blocks queued in vq. Hashing
// (SHA-256 of every block) is most of a receiver's CPU, and hashing many
// blocks at once is about twice as fast where the processor allows it
// (multisha): so blocks wait in vq until a batch of lanes has arrived, or
// until no request is in flight, when nothing more is on its way to join
// them and whatever is queued goes (or maxQueueBytes are waiting, or the
// oldest has waited maxQueueWait). Every do queues its blocks and then
// drains, so the last request of a lull always empties the queue.
func (r *fetch) drain(ctx context.Context) error {
	var (
		batch []arrived
		ids   []blocks.ID
		data  [][]byte
		ok    []blocks.Verified
		errs  []error
	)
	for {
		r.mu.Lock()
		idle := r.inflight == 0
		r.mu.Unlock()
		r.vmu.Lock()
		if len(r.vq) == 0 || (!idle && len(r.vq) < batchLanes && r.vqBytes < maxQueueBytes && time.Since(r.vq[0].at) < maxQueueWait) {
			r.vmu.Unlock()
			return r.commit(false)
		}
		n := min(len(r.vq), multisha.Lanes)
		batch = append(batch[:0], r.vq[:n]...)
		r.vq = append(r.vq[:0], r.vq[n:]...)
		for _, q := range batch {
			r.vqBytes -= len(q.b.data)
		}
		r.vmu.Unlock()

		ids, data = ids[:0], data[:0]
		for _, q := range batch {
			ids = append(ids, r.units[q.u].id) // id is immutable
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
	un := &r.units[q.u]
	if verr != nil {
		q.b.release()
		r.mu.Lock()
		r.penalise(ctx, q.p, fmt.Errorf("%w: %w", errBadBlock, verr))
		un.busy = false
		r.signal()
		r.mu.Unlock()
		return nil
	}
	if err := r.put(ctx, v); err != nil {
		return fmt.Errorf("store block %s: %w", un.id.Short(), err)
	}
	if err := r.writeOut(un.idx, v.Data()); err != nil {
		return err
	}
	q.b.release()
	r.written(q.p, q.u)
	return nil
}

// releaseQueued gives back the buffers of blocks a failed fetch left in
// vq.
func (r *fetch) releaseQueued() {
	r.vmu.Lock()
	defer r.vmu.Unlock()
	for _, q := range r.vq {
		q.b.release()
	}
	r.vq, r.vqBytes = nil, 0
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

// written records that p delivered unit u and that it has been written:
// it is no longer pending. Without a batch it is also done. Called
// without mu.
func (r *fetch) written(p *peerState, u int) {
	r.mu.Lock()
	un := &r.units[u]
	un.written = true
	un.busy = false
	// Swap-remove u from pending.
	i, last := r.pos[u], len(r.pending)-1
	r.pending[i] = r.pending[last]
	r.pos[r.pending[i]] = i
	r.pending = r.pending[:last]
	p.stats.Blocks++
	p.stats.Bytes += int64(un.size)
	r.lastProgress = time.Now()
	var n int64
	if r.batch == nil {
		un.done = true
		r.stats.Fetched++
		r.stats.FetchedBytes += int64(un.size)
		n = int64(un.size) * int64(len(un.idx))
	}
	r.signal()
	r.mu.Unlock()
	if r.prog != nil && n > 0 {
		r.prog.Add(n)
	}
}

// notFound records that p no longer holds unit u. Called without mu.
func (r *fetch) notFound(p *peerState, u int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.stats.NotFound++
	if p.has[u] {
		p.has[u] = false
		r.units[u].holders = slices.DeleteFunc(r.units[u].holders, func(pi int) bool { return pi == p.idx })
	}
	r.units[u].busy = false
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

// penalise scores a failed request to p: bad data bans the peer for the
// fetch; a timeout halves its request bound and cools it down; any
// failure cools it down exponentially, and MaxPeerFailures in a row drop
// it. rctx is the failed request's own context. Called with mu held.
func (r *fetch) penalise(rctx context.Context, p *peerState, err error) {
	log := r.log.With("peer", p.target, "err", err)
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
	if p.failures >= r.opts.MaxPeerFailures && !p.dropped {
		p.dropped = true
		p.stats.Dropped = true
		log.Warn("peer failed too often; dropped from this fetch", "failures", p.failures)
	}
}
