package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/p2pc/p2pc/internal/blocks"
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
	// bulk path (docs/design/transfer.md).
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
	log := f.log.With("file", file.Short())
	return &fetch{
		f:     f,
		opts:  f.opts,
		log:   log,
		store: f.store,
		prog:  p,
		start: time.Now(),
		st:    newLedger(file, f.opts, log),
	}
}

// finish snapshots the stats of a fetch that has returned err.
func (f *Fetcher) finish(r *fetch, err error) (*FetchStats, error) {
	stats := r.st.snapshot(r.start)
	if err != nil {
		return &stats, fmt.Errorf("fetch %s: %w", stats.File.Short(), err)
	}
	return &stats, nil
}

// fetch is the state of one Fetch call. What it fetches and where the
// blocks go is set up before the workers start and read-only after; what
// changes while they run has its own lock: the ledger (what is missing, in
// flight, held by whom). The workers (worker, do) ask the ledger for a
// request, send it, and verify and write the answers (fetchverify.go); the
// refresher asks the peers what they hold (fetchpeer.go); the committer
// makes written blocks durable (commit).
type fetch struct {
	f     *Fetcher
	opts  FetchOptions
	log   *slog.Logger
	store blocks.Store
	prog  Progress
	start time.Time

	st *ledger

	// Set up before the workers start (run, plan, FetchFile), then
	// read-only.
	m       *blocks.Manifest
	unitOf  map[blocks.ID]int // unit of a missing block
	heldIdx []int             // manifest positions of the blocks held at the start
	fromPos map[blocks.ID]int // with part: a position where a block is in place
	out     *os.File          // FetchFile's destination (temporary name), or nil
	batch   *blocks.Batch     // blocks written but not yet committed, if the store batches
	inPlace *blocks.DiskStore
	part    *blocks.Partial // with inPlace: the file being assembled in the store
}

// run fetches file from targets: it adds the peers, gets the manifest and
// plans what is missing, then transfers it.
func (r *fetch) run(ctx context.Context, file blocks.ID, targets []string) error {
	if err := r.addPeers(targets); err != nil {
		return err
	}
	if err := r.prepare(ctx, file); err != nil {
		return err
	}
	missing := len(r.st.units)
	if missing == 0 {
		return nil
	}
	if len(r.st.peers) == 0 {
		return fmt.Errorf("%d blocks missing and no peers given: %w", missing, ErrNoHolder)
	}
	total, present := r.st.counts()
	r.log.Info("fetching", "blocks", total, "present", present, "missing", missing, "peers", len(r.st.peers))
	if b, ok := r.store.(interface{ NewBatch() *blocks.Batch }); ok && r.part == nil {
		r.batch = b.NewBatch()
	}
	return r.transfer(ctx)
}

// addPeers adds each target once as a source.
func (r *fetch) addPeers(targets []string) error {
	seen := map[string]bool{"": true}
	for _, t := range targets {
		if seen[t] {
			continue
		}
		seen[t] = true
		c, err := r.f.pool.Blocks(t)
		if err != nil {
			return err
		}
		var bulk *bulkPeer
		if !r.opts.NoBulk {
			bulk = r.f.pool.bulkPeer(t)
		}
		r.st.addPeer(t, c, bulk)
	}
	return nil
}

// prepare gets the manifest, opens the file assembled in place (if so),
// plans the missing blocks and sizes FetchFile's output.
func (r *fetch) prepare(ctx context.Context, file blocks.ID) error {
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
	return nil
}

// transfer fetches the planned blocks: Concurrency workers send requests
// and verify and write the answers, a refresher asks the peers again what
// they hold every RefreshInterval, and, if the store batches, a committer
// makes written blocks durable every CommitInterval. A committer's failure ends
// the fetch with its error.
func (r *fetch) transfer(ctx context.Context) error {
	r.refresh(ctx)
	cctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	workers, wctx := errgroup.WithContext(cctx)
	workers.SetLimit(r.opts.Concurrency)
	refreshCtx, stopRefresh := context.WithCancel(wctx)
	var bg errgroup.Group
	bg.Go(func() error {
		every(refreshCtx.Done(), r.opts.RefreshInterval, func() bool {
			r.refresh(refreshCtx)
			return true
		})
		return nil
	})
	stopCommits := make(chan struct{})
	if r.batch != nil {
		bg.Go(func() error {
			every(stopCommits, r.opts.CommitInterval, func() bool {
				if err := r.commit(true); err != nil {
					fail(err)
					return false
				}
				return true
			})
			return nil
		})
	}
	for range r.opts.Concurrency {
		workers.Go(func() error { return r.worker(wctx) })
	}
	err := workers.Wait()
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

// every calls f every interval until stop is closed or f returns false.
func every(stop <-chan struct{}, interval time.Duration, f func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
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
	units := make([]int, 0, len(ids))
	for _, id := range ids {
		if u, ok := r.unitOf[id]; ok {
			units = append(units, u)
		}
	}
	if n := r.st.committed(units); r.prog != nil && n > 0 {
		r.prog.Add(n)
	}
	return nil
}

func (r *fetch) worker(ctx context.Context) error {
	for {
		j, err := r.st.next(ctx)
		if err != nil || j == nil {
			return err
		}
		if err := r.do(ctx, j); err != nil {
			return err
		}
	}
}

// do sends one job's request and handles the answers. The peer's slot is
// freed as soon as the answers are in; each block is then verified (hashed)
// once, by this worker, and written, outside it (verify), so that neither
// the hashing nor a slow disk idles the network: Concurrency bounds the
// requests and the hashing and writes together, PerPeer only the requests. The store trusts that one check. A block
// that fails it bans the peer and goes back to the pool; the others are
// kept, each verified on its own. Only a local failure (the store, the
// output file) is returned: peer trouble is dealt with here.
func (r *fetch) do(ctx context.Context, j *job) error {
	p := j.peer
	ids := make([]blocks.ID, len(j.units))
	for i, u := range j.units {
		ids[i] = r.st.units[u].id // immutable
	}
	var got []arrived
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	answered := 0
	err := r.get(rctx, p, ids, func(i int, b *rxBlock) (bool, error) {
		u := j.units[i]
		un := &r.st.units[u] // id and size are immutable
		if b == nil {
			r.st.notFound(p, u)
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

	r.st.requestDone(ctx, rctx, j, answered, err)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return r.verify(ctx, got)
}
