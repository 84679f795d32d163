package swarmjobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// Ownership that moves (docs/protocol.md, swarm jobs: takeover).
//
// The owner streams the job's journal to its successors, the holders of
// its record in their order (the members ranked after the owner that
// took the bundle): after each commit, a snapshot of job.db and the task
// outputs they lack, as a Hold of kind "state" (replica.go's syncState).
// A result counts as durable only once they hold it (job.RunOptions.
// Replicate). When the membership has no trace of the owner any more
// (gossip declared it dead), the first holder that is alive takes the
// job over: its record takes epoch+1, the state it holds becomes the
// output folder, and the coordinator resumes it there, as `p2pc run`
// resumes an output folder; peers hand over what they finished and hold
// for the job's run. Peers refuse coordinators of a lower epoch
// (Hello.epoch, package node), a member refuses copies of a lower
// epoch, and an owner that meets a higher epoch steps down and holds.

// KindState is a bundle of a job's journal: job.db (a snapshot) and task
// outputs, merged into the holder's copy of the state.
const KindState = "state"

// stateDir is the folder of a job's replicated state on a holder.
const stateDir = "state"

// ErrFenced: the runner stopped because a later owner of the job exists.
var ErrFenced = errors.New("a later owner of the job exists")

// takeoverEvery is how often a holder looks whether it must take over.
const takeoverEvery = 200 * time.Millisecond

// settleTime: a member takes over nothing before its membership has had
// this long to learn the swarm (a member just started knows nobody).
const settleTime = 5 * time.Second

// takeoverLoop takes over the jobs whose owner died, until ctx ends.
func (s *Service) takeoverLoop(ctx context.Context) {
	started := time.Now()
	t := time.NewTicker(takeoverEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(started) < settleTime || s.cfg.Gone == nil {
			continue
		}
		for _, e := range s.orphaned() {
			s.takeOver(e)
		}
	}
}

// orphaned lists the running jobs held here whose owner is gone and whose
// first live holder is this member.
func (s *Service) orphaned() []*entry {
	s.mu.Lock()
	var held []*pb.Record
	byID := map[string]*entry{}
	for id, e := range s.jobs {
		if !e.owned && !Ended(e.rec.State) && e.rec.OwnerId != s.cfg.ID.String() {
			held = append(held, clone(e.rec))
			byID[id] = e
		}
	}
	s.mu.Unlock()
	var out []*entry
	for _, r := range held {
		if !s.cfg.Gone(r.Owner, r.OwnerId) {
			continue
		}
		alive := func(h string) bool { return !s.cfg.Gone(h, "") }
		if firstLive(r.Holders, alive, s.cfg.Name) == s.cfg.Name && exists(filepath.Join(byID[r.Id].dir, "bundle")) {
			out = append(out, byID[r.Id])
		}
	}
	return out
}

// firstLive is the first of holders that is self or alive (suspect
// counts: only a member gossip declared dead is passed over); "" if
// none.
func firstLive(holders []string, alive func(string) bool, self string) string {
	for _, h := range holders {
		if h == self || alive(h) {
			return h
		}
	}
	return ""
}

// takeOver makes this member the owner of e's job at the next epoch and
// resumes it from the state it holds.
func (s *Service) takeOver(e *entry) {
	s.mu.Lock()
	if e.owned {
		s.mu.Unlock()
		return
	}
	old := e.rec
	rec := clone(old)
	rec.Epoch++
	rec.Owner, rec.OwnerId, rec.OwnerAddr = s.cfg.Name, s.cfg.ID.String(), s.cfg.Addr
	rec.Holders = slices.DeleteFunc(slices.Clone(old.Holders), func(h string) bool { return h == s.cfg.Name })
	rec.Running = 0
	e.rec = rec
	e.owned = true
	e.steppedDown = false
	e.departed = []string{old.Owner}
	e.sent = nil
	e.ended = make(chan struct{})
	e.changed = make(chan struct{})
	s.mu.Unlock()
	state, out := filepath.Join(e.dir, stateDir), filepath.Join(e.dir, "out")
	// A copy still arriving from the old owner lands in a new state
	// folder, never in the output folder.
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if exists(state) {
		os.RemoveAll(out)
		if err := os.Rename(state, out); err != nil {
			s.log.Warn("the journal held here could not become the output folder; the job starts over", "job", rec.Id[:12], "err", err)
		}
	}
	if err := writeRecord(e.dir, rec); err != nil {
		s.log.Warn("job record not saved", "job", rec.Id[:12], "err", err)
	}
	s.log.Info("took over a job whose owner is gone", "job", rec.Id[:12], "name", rec.Name, "epoch", rec.Epoch, "old_owner", old.Owner, "holders", rec.Holders)
	s.startRun(e)
	if len(rec.Holders) < s.cfg.Copies {
		s.wg.Go(func() { s.addHolders(e) })
	}
}

// addHolders gives the job's bundle to more members until Copies hold it
// (after a takeover took one holder away).
func (s *Service) addHolders(e *entry) {
	_, r, ok := s.get(e.rec.Id)
	if !ok {
		return
	}
	held, _ := s.replicate(s.life, r, KindJob, filepath.Join(e.dir, "bundle"), r.Holders, r.Submitter)
	if len(held) > len(r.Holders) {
		s.update(e, func(r *pb.Record) { r.Holders = held })
	}
}

// stepDown ends this member's ownership of e's job: a later owner exists
// (newer, when known). The coordinator stops; the job is held.
func (s *Service) stepDown(e *entry, newer *pb.Record) {
	s.mu.Lock()
	if !e.owned {
		if newer != nil && Newer(newer, e.rec) {
			e.rec = clone(newer)
		}
		s.mu.Unlock()
		return
	}
	e.owned = false
	e.steppedDown = true
	cancel, ended := e.cancel, e.ended
	s.mu.Unlock()
	s.log.Warn("a later owner of a job this member owned exists: stepping down", "job", e.rec.Id[:12], "epoch", e.rec.Epoch, "newer_epoch", newer.GetEpoch(), "newer_owner", newer.GetOwner())
	stopped := true
	if cancel != nil {
		cancel()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			stopped = false
			s.log.Warn("the coordinator of a job stepped down from did not end within 30s", "job", e.rec.Id[:12])
		}
	}
	if stopped {
		s.dropStaleOutput(e)
	}
	s.mu.Lock()
	if newer != nil && Newer(newer, e.rec) {
		e.rec = clone(newer)
	}
	r := clone(e.rec)
	close(e.changed)
	e.changed = make(chan struct{})
	s.mu.Unlock()
	if err := writeRecord(e.dir, r); err != nil {
		s.log.Warn("job record not saved", "job", r.Id[:12], "err", err)
	}
}

// newerElsewhere asks the job's other members for their record of it and
// returns one of a higher epoch than rec's, or nil. It waits up to wait
// for the membership to name one of them.
func (s *Service) newerElsewhere(ctx context.Context, rec *pb.Record, wait time.Duration) *pb.Record {
	deadline := time.Now().Add(wait)
	var asked bool
	var best *pb.Record
	for !asked && ctx.Err() == nil {
		for _, m := range s.cfg.Members() {
			if m.ID == s.cfg.ID.String() {
				continue
			}
			asked = true
			cc, err := s.cfg.Dial(m.Addr)
			if err != nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			rep, err := pb.NewJobsClient(cc).List(cctx, &pb.ListRequest{})
			cancel()
			if err != nil {
				continue
			}
			for _, r := range rep.Jobs {
				if r.Id == rec.Id && r.Epoch > rec.Epoch && (best == nil || Newer(r, best)) {
					best = r
				}
			}
		}
		if asked || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return best
}

// resumeOwned resumes an owned job found running at start, unless another
// member has taken it over meanwhile (it is held then).
func (s *Service) resumeOwned(ctx context.Context, e *entry) {
	if newer := s.newerElsewhere(ctx, e.rec, 3*time.Second); newer != nil {
		s.log.Info("a job this member owned was taken over while it was away: holding it", "job", e.rec.Id[:12], "epoch", e.rec.Epoch, "newer_epoch", newer.Epoch, "owner", newer.Owner)
		s.mu.Lock()
		e.owned = false
		e.rec = clone(newer)
		close(e.ended)
		r := clone(e.rec)
		s.mu.Unlock()
		s.dropStaleOutput(e)
		if err := writeRecord(e.dir, r); err != nil {
			s.log.Warn("job record not saved", "job", r.Id[:12], "err", err)
		}
		return
	}
	s.log.Info("resuming an owned job", "job", e.rec.Id[:12], "name", e.rec.Name, "epoch", e.rec.Epoch)
	s.startRun(e)
}

// syncState copies the state of owned job e to its holders: the task
// outputs each lacks, then the journal's snapshot snap as job.db. It
// succeeds once every holder not declared dead took it (a suspect one
// too: it may be the one that takes over), and at least one did.
func (s *Service) syncState(ctx context.Context, e *entry, snap string) error {
	_, r, ok := s.get(e.rec.Id)
	if !ok || !e.owned {
		return fmt.Errorf("job %s: not owned here", e.rec.Id[:12])
	}
	s.mu.Lock()
	if s.known == nil {
		s.known = map[string]Member{}
	}
	for _, m := range s.cfg.Members() {
		s.known[m.Name] = m
	}
	byName := maps.Clone(s.known)
	s.mu.Unlock()
	outs, err := taskFiles(filepath.Join(e.dir, "out"))
	if err != nil {
		return err
	}
	var errs []error
	took := 0
	for _, h := range r.Holders {
		m, ok := byName[h]
		if s.cfg.Gone != nil && s.cfg.Gone(h, "") || s.cfg.Gone == nil && !ok {
			continue // declared dead: the next holder succeeds instead
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no address known", h))
			continue
		}
		s.mu.Lock()
		if e.sent == nil {
			e.sent = map[string]map[string]bool{}
		}
		sent := e.sent[h]
		s.mu.Unlock()
		files := stateCopy(outs, sent, snap)
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.hold(hctx, m, r, KindState, files)
		cancel()
		if err != nil {
			if fenced := staleRefusal(err); fenced != nil {
				go s.stepDown(e, s.newerElsewhere(s.life, r, 0))
				return fenced
			}
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
			continue
		}
		s.mu.Lock()
		if e.sent[h] == nil {
			e.sent[h] = map[string]bool{}
		}
		for _, f := range files[:len(files)-1] {
			e.sent[h][f.Rel] = true
		}
		s.mu.Unlock()
		took++
	}
	if took == 0 && len(errs) == 0 {
		s.replaceHolders(e)
		return fmt.Errorf("job %s: none of its holders (%s) is alive to keep its journal", r.Id[:12], strings.Join(r.Holders, ", "))
	}
	return errors.Join(errs...)
}

// journalFile is the job database in an output folder.
const journalFile = "job.db"

// staleOwner begins the refusal of a copy from an owner of a lower epoch.
const staleOwner = "stale owner"

// taskFiles lists the task outputs of the output folder out (out/tasks).
func taskFiles(out string) ([]File, error) {
	fs, err := DirFiles(filepath.Join(out, "tasks"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	for i := range fs {
		fs[i].Rel = "tasks/" + fs[i].Rel
	}
	return fs, err
}

// mergeInto receives a bundle into a temporary folder beside dst, then,
// holding mu, moves each file into dst (replacing one there), the
// journal last.
func mergeInto(recv func() (*pb.Bundle, error), dst string, mu *sync.Mutex) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := recvFiles(recv, tmp); err != nil {
		return err
	}
	var rels []string
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(tmp, p)
		rels = append(rels, rel)
		return err
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(rels, func(a, b string) int {
		// The journal last: what it names is in place before it.
		switch {
		case a == journalFile && b != journalFile:
			return 1
		case b == journalFile && a != journalFile:
			return -1
		}
		return 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, rel := range rels {
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(tmp, rel), to); err != nil {
			return err
		}
	}
	return nil
}
