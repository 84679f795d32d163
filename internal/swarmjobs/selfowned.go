package swarmjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// A job its own process owns (docs/protocol.md, swarm jobs: a plain run).
//
// A plain `p2pc run` with members present owns its job at epoch 1 (or
// one above the last epoch the swarm knew of it): it places the job's
// bundle on Copies members, in the job's rank, and after each commit
// copies its journal to them as an owning member does (kind "state").
// When the process dies without a word, they take the job over as they
// take over a member's. When the run ends (or is interrupted) it tells
// them (kind "ended") and they forget the job: its output folder is the
// submitter's own.

// KindEnded: the owner of a job whose output folder is its own (a plain
// run) ended it; its holders forget the job.
const KindEnded = "ended"

// PluginKeyFile is the bundle's note of the plugin's source key, when
// the plugin was built from a Go package (its job ID and task keys
// derive from that key, not from the executable's digest).
const PluginKeyFile = "plugin.key"

// ErrNoHolders: no member holds the job's journal yet (too few members,
// or the bundle is still on its way); the run counts its commits as
// durable on its own machine meanwhile.
var ErrNoHolders = errors.New("no member holds the job yet")

// SelfOwnedConfig configures a SelfOwned.
type SelfOwnedConfig struct {
	// Self is the process's node in the membership.
	Self Member
	// Members returns the live members; Dial connects to one.
	Members func() []Member
	Dial    func(addr string) (grpc.ClientConnInterface, error)
	// Copies is how many members hold the job (default 2); MinMembers
	// how many members that may hold it the membership must list before
	// the job is placed (default 2).
	Copies, MinMembers int
	// After: the job is placed once it has run this long (a shorter job
	// is as quick to run again as to take over); 0: at once.
	After  time.Duration
	Logger *slog.Logger
}

// SelfOwned copies the journal of a job its own process runs to the
// job's holders. Replicate is called from one goroutine at a time.
type SelfOwned struct {
	cfg    SelfOwnedConfig
	log    *slog.Logger
	bundle []File
	out    string

	mu   sync.Mutex
	rec  *pb.Record
	sent map[string]map[string]bool // per holder, the task outputs it holds (Replicate's goroutine)
	// placing: a placement runs; tried: when the last one began.
	placing bool
	tried   time.Time
	done    chan struct{} // closed when the placement in flight ended
	// began: when the replicator was made; stop ends a placement in
	// flight (End); closed: no placement starts any more (Close).
	began  time.Time
	stop   context.CancelFunc
	closed bool
}

// NewSelfOwned returns the replicator of job rec (ID, name, epoch; owner
// and submitter filled from cfg.Self), whose bundle is files and output
// folder out.
func NewSelfOwned(cfg SelfOwnedConfig, rec *pb.Record, files []File, out string) *SelfOwned {
	if cfg.Copies <= 0 {
		cfg.Copies = 2
	}
	if cfg.MinMembers <= 0 {
		cfg.MinMembers = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := clone(rec)
	r.State, r.Owner, r.OwnerId, r.OwnerAddr, r.Submitter = StateRunning, cfg.Self.Name, cfg.Self.ID, cfg.Self.Addr, cfg.Self.ID
	if r.Epoch == 0 {
		r.Epoch = 1
	}
	if r.CreatedMs == 0 {
		r.CreatedMs = time.Now().UnixMilli()
	}
	return &SelfOwned{cfg: cfg, log: cfg.Logger.With("component", "swarmjobs"), bundle: files, out: out, rec: r, sent: map[string]map[string]bool{}, began: time.Now()}
}

// placeEvery spaces the tries to place the job while the membership is
// too small or the members refuse it.
const placeEvery = 5 * time.Second

// Record returns a copy of the job's record as the holders get it.
func (o *SelfOwned) Record() *pb.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	return clone(o.rec)
}

// Progress notes the job's counts, sent with the next copy.
func (o *SelfOwned) Progress(done, failed, running, total int) {
	o.mu.Lock()
	o.rec.Done, o.rec.Failed, o.rec.Running, o.rec.Total = int64(done), int64(failed), int64(running), int64(total)
	o.mu.Unlock()
}

// candidates are the members that may hold the job, in its rank: not
// this process's node (nor another node of its identity), not another
// plain run's.
func (o *SelfOwned) candidates() []Member {
	var out []Member
	for _, m := range Rank(o.rec.Id, o.cfg.Members()) {
		if m.ID != o.cfg.Self.ID && m.Name != o.cfg.Self.Name && !IsRunNode(m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// IsRunNode says whether a member's name is that of a `p2pc run`'s node
// (HOST-run-PID), which serves no jobs.
func IsRunNode(name string) bool {
	i := strings.LastIndex(name, "-run-")
	if i < 0 || i+5 == len(name) {
		return false
	}
	for _, c := range name[i+5:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Replicate is job.RunOptions.Replicate: it copies the snapshot snap of
// the job database and the task outputs each holder lacks to the
// holders. Until the job is placed it starts placing it (in the
// background) and returns ErrNoHolders; snap "" asks only whether it is
// placed.
func (o *SelfOwned) Replicate(ctx context.Context, snap string) error {
	o.mu.Lock()
	placed := len(o.rec.Holders) > 0
	due := time.Since(o.began) >= o.cfg.After && (o.tried.IsZero() || time.Since(o.tried) >= placeEvery)
	if !placed && !o.placing && due && !o.closed {
		var pctx context.Context
		pctx, o.stop = context.WithCancel(context.WithoutCancel(ctx))
		o.placing, o.tried, o.done = true, time.Now(), make(chan struct{})
		go o.place(pctx)
	}
	o.mu.Unlock()
	if !placed {
		return ErrNoHolders
	}
	if snap == "" {
		return nil
	}
	return o.sync(ctx, snap)
}

// place puts the job's bundle on up to Copies members, in the job's rank.
func (o *SelfOwned) place(ctx context.Context) {
	var held []string
	defer func() {
		o.mu.Lock()
		o.placing = false
		if len(held) > 0 {
			o.rec.Holders = held
		}
		close(o.done)
		o.mu.Unlock()
	}()
	ms := o.candidates()
	if len(ms) < o.cfg.MinMembers {
		return
	}
	rec := o.Record()
	for _, m := range ms {
		if len(held) == o.cfg.Copies {
			break
		}
		hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := o.hold(hctx, m, rec, KindJob, o.bundle)
		cancel()
		if err != nil {
			o.log.Info("member did not take a copy of the job", "job", shortJob(rec.Id), "member", m.Name, "err", status.Convert(err).Message())
			continue
		}
		held = append(held, m.Name)
	}
	if len(held) > 0 {
		o.log.Info("job's journal copied to its holders as it runs: if this process dies, they finish the job", "job", shortJob(rec.Id), "holders", held, "epoch", rec.Epoch)
	}
}

// Wait waits for a placement in flight (bounded by ctx).
func (o *SelfOwned) Wait(ctx context.Context) {
	o.mu.Lock()
	done := o.done
	o.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (o *SelfOwned) hold(ctx context.Context, m Member, rec *pb.Record, kind string, files []File) error {
	cc, err := o.cfg.Dial(m.Addr)
	if err != nil {
		return err
	}
	st, err := pb.NewJobsClient(cc).Hold(ctx)
	if err != nil {
		return err
	}
	if err := sendBundle(st.Send, &pb.Header{Kind: kind, Record: rec, Size: filesSize(files)}, files); err != nil {
		// The holder refused early: its answer says why.
		if _, rerr := st.CloseAndRecv(); rerr != nil {
			return rerr
		}
		return err
	}
	_, err = st.CloseAndRecv()
	return err
}

// sync sends each holder the task outputs it lacks and the journal snap.
// It succeeds once every holder that answers took it; a holder that does
// not answer is passed over, as a dead one is by an owning member.
func (o *SelfOwned) sync(ctx context.Context, snap string) error {
	outs, err := taskFiles(o.out)
	if err != nil {
		return err
	}
	rec := o.Record()
	byName := map[string]Member{}
	for _, m := range o.cfg.Members() {
		byName[m.Name] = m
	}
	var errs []error
	took := 0
	for _, h := range rec.Holders {
		m, ok := byName[h]
		if !ok {
			continue // gone from the membership: the next holder takes over
		}
		sent := o.sent[h]
		files := stateCopy(outs, sent, snap)
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := o.hold(hctx, m, rec, KindState, files)
		cancel()
		if err != nil {
			if fenced := staleRefusal(err); fenced != nil {
				return fenced
			}
			errs = append(errs, fmt.Errorf("%s: %s", h, status.Convert(err).Message()))
			continue
		}
		if sent == nil {
			sent = map[string]bool{}
			o.sent[h] = sent
		}
		for _, f := range files[:len(files)-1] {
			sent[f.Rel] = true
		}
		took++
	}
	if took == 0 && len(errs) == 0 {
		return o.unplace(rec.Holders)
	}
	return errors.Join(errs...)
}

// Close starts no placement any more (the job is over); it says whether
// none was ever started: no member was asked to hold the job, so there
// is nobody to tell of its end.
func (o *SelfOwned) Close() (untouched bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	return o.tried.IsZero()
}

// End tells the holders that the job ended in state (this process keeps
// its output folder): they forget it. It ends a placement in flight
// first, and tells the members that took it too.
func (o *SelfOwned) End(ctx context.Context, state string) {
	o.mu.Lock()
	if o.stop != nil {
		o.stop() // a placement in flight: the members that took it are told
	}
	o.mu.Unlock()
	o.Wait(ctx)
	rec := o.Record()
	if len(rec.Holders) == 0 {
		return
	}
	rec.State, rec.Running, rec.EndedMs = state, 0, time.Now().UnixMilli()
	byName := map[string]Member{}
	for _, m := range o.cfg.Members() {
		byName[m.Name] = m
	}
	var wg sync.WaitGroup
	for _, h := range rec.Holders {
		m, ok := byName[h]
		if !ok {
			continue
		}
		wg.Go(func() {
			if err := o.hold(ctx, m, rec, KindEnded, nil); err != nil {
				o.log.Info("holder not told that the job ended", "job", shortJob(rec.Id), "member", h, "err", status.Convert(err).Message())
			}
		})
	}
	wg.Wait()
}

// holdEnded forgets a job held for an owner that keeps its output itself
// and ended it (kind ended).
func (s *Service) holdEnded(rec *pb.Record) error {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.mu.Lock()
	e, ok := s.jobs[rec.Id]
	switch {
	case !ok:
		s.mu.Unlock()
		return nil
	case e.owned:
		s.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "hold: member %s owns job %s itself (epoch %d)", s.cfg.Name, shortJob(rec.Id), e.rec.Epoch)
	case e.rec != nil && rec.Epoch < e.rec.Epoch:
		s.mu.Unlock()
		return status.Errorf(codes.PermissionDenied, "hold: %s: job %s is owned at epoch %d by %s, the end is of epoch %d", staleOwner, shortJob(rec.Id), e.rec.Epoch, e.rec.Owner, rec.Epoch)
	}
	delete(s.jobs, rec.Id)
	s.mu.Unlock()
	if err := os.RemoveAll(e.dir); err != nil {
		s.log.Warn("folder of a job that ended not removed", "job", shortJob(rec.Id), "err", err)
	}
	s.measure(rec.Id)
	s.log.Info("a job held for its submitter's run ended there: forgotten", "job", shortJob(rec.Id), "state", rec.State)
	return nil
}

// readPluginKey reads the plugin's source key from bundle folder b, ""
// if it has none.
func readPluginKey(b string) (string, error) {
	k, err := os.ReadFile(filepath.Join(b, PluginKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(k)), err
}

// stateCopy is a copy of the journal for a holder: the task outputs of
// outs it lacks (not in sent), then the snapshot snap as the journal.
func stateCopy(outs []File, sent map[string]bool, snap string) []File {
	var files []File
	for _, f := range outs {
		if !sent[f.Rel] {
			files = append(files, f)
		}
	}
	return append(files, File{Rel: journalFile, Path: snap})
}

// staleRefusal is ErrFenced, wrapped with the holder's reason, when err
// is a holder's refusal of a copy from a stale owner; nil otherwise.
func staleRefusal(err error) error {
	if st := status.Convert(err); st.Code() == codes.PermissionDenied && strings.Contains(st.Message(), staleOwner) {
		return fmt.Errorf("%w: %s", ErrFenced, st.Message())
	}
	return nil
}
