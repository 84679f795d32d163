package swarmjobs

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/spec"
)

// Copies of an ended job's output folder, and the member's cap on what
// it keeps (docs/protocol.md, Swarm jobs, "Copies of the output").
//
// The record's results_on names the members holding the output folder.
// Every member holding an ended job looks at it each tick: the first of
// its live holders in the job's rank (Rank) is the job's keeper. Until
// the submitter fetched the job, the keeper makes a copy on the next
// member in rank order whenever fewer than 1+Copies members hold one, a
// holder that has not been a live member for LostAfter counting as gone;
// it tells the holders the new list (a Hold of kind record). Once the
// submitter fetched it, every other member drops its copy (output and
// bundle), but only after the keeper confirmed it holds the output, so
// the first-ranked copy never goes: a member drops only towards a member
// ranked above it.

// KindRecord is a Hold of the record alone, no files: a member holding an
// ended job's output folder tells another where the copies are.
const KindRecord = "record"

// refusedFor is how long a member that refused a copy is not asked again
// for the same job.
const refusedFor = time.Minute

// keeping is a Service's account of copies and disk use (Service.mu).
type keeping struct {
	sizes    map[string]int64 // job ID -> bytes of its folder here
	reserved int64            // bytes of copies being received
	seen     map[string]time.Time
	since    time.Time            // when this member began to watch the membership
	refused  map[string]time.Time // job ID + "/" + node ID -> when it refused a copy
	poke     chan struct{}
}

func newKeeping() keeping {
	return keeping{sizes: map[string]int64{}, seen: map[string]time.Time{}, since: time.Now(), refused: map[string]time.Time{}, poke: make(chan struct{}, 1)}
}

// used is the bytes this member keeps of the swarm's jobs, reserved ones
// included.
func (k *keeping) used() int64 {
	n := k.reserved
	for _, b := range k.sizes {
		n += b
	}
	return n
}

// DiskUse is what a member keeps of the swarm's jobs against its cap
// (ListReply.disk_cap, disk_used).
type DiskUse struct {
	Cap, Used int64
}

// reserve makes room for a copy of n bytes of job id, or refuses it with
// ResourceExhausted when this member's cap (Config.Disk) would be passed.
// Nothing is dropped to make room.
func (s *Service) reserve(id string, n int64) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cfg.Disk; c > 0 {
		if used := s.keep.used(); used+max(n, 1) > c {
			return nil, status.Errorf(codes.ResourceExhausted, "member %s is at its disk cap: it keeps %s of the swarm's jobs and holds at most %s (p2pc join --disk); a copy of job %s needs %s",
				s.cfg.Name, spec.FormatSize(used), spec.FormatSize(c), shortJob(id), spec.FormatSize(n))
		}
	}
	s.keep.reserved += n
	return func() {
		s.mu.Lock()
		s.keep.reserved -= n
		s.mu.Unlock()
	}, nil
}

func shortJob(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// measure counts the bytes of job id's folder on this member.
func (s *Service) measure(id string) {
	n, err := dirSize(s.jobDir(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.keep.sizes, id)
		return
	}
	s.keep.sizes[id] = n
}

func (s *Service) measureAll() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.measure(id)
	}
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// filesSize is the bytes of files together (those it cannot stat count
// 0: the copy fails on them anyway).
func filesSize(files []File) int64 {
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f.Path); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// maySend says whether node from may send this member a copy of kind
// with rec: the job's owner always; for an ended job's output folder or
// record, a member the record lists as holding the output, if this
// member's own record (when it has one) agrees on the owner and the
// submitter and lists the sender too.
func (s *Service) maySend(from, kind string, rec *pb.Record) bool {
	if from == rec.OwnerId {
		return true
	}
	if (kind != KindResults && kind != KindRecord) || !Ended(rec.State) || !slices.Contains(rec.ResultsOn, from) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[rec.Id]
	if !ok || e.rec == nil {
		return kind == KindResults
	}
	mine := e.rec
	return mine.OwnerId == rec.OwnerId && mine.Submitter == rec.Submitter && (slices.Contains(mine.ResultsOn, from) || from == mine.OwnerId)
}

// merge takes rec as e's record unless e's is newer; fetched stays once
// said (s.mu held).
func merge(e *entry, rec *pb.Record) {
	fetched := rec.Fetched || (e.rec != nil && e.rec.Fetched)
	if e.rec == nil || !Newer(e.rec, rec) {
		e.rec = clone(rec)
		e.rec.Results = false
	}
	e.rec.Fetched = fetched
}

// refusedCopy logs that member did not take a copy of job id: a warning
// when it is at its disk cap (the owner's user should see it), else
// information (the member may be down; the next one is asked).
func (s *Service) refusedCopy(id, kind, member string, err error) {
	lvl := slog.LevelInfo
	if status.Code(err) == codes.ResourceExhausted {
		lvl = slog.LevelWarn
	}
	s.log.Log(context.Background(), lvl, "member did not take a copy", "job", shortJob(id), "kind", kind, "member", member, "err", status.Convert(err).Message())
}

// holdRecord takes a record sent alone (kind record).
func (s *Service) holdRecord(rec *pb.Record) error {
	s.mu.Lock()
	e, ok := s.jobs[rec.Id]
	if !ok {
		s.mu.Unlock()
		return status.Errorf(codes.NotFound, "hold: member %s holds nothing of job %s", s.cfg.Name, shortJob(rec.Id))
	}
	merge(e, rec)
	r := clone(e.rec)
	s.mu.Unlock()
	if err := writeRecord(e.dir, r); err != nil {
		return status.Errorf(codes.Internal, "hold: %v", err)
	}
	s.pokeKeep()
	return nil
}

func (s *Service) pokeKeep() {
	select {
	case s.keep.poke <- struct{}{}:
	default:
	}
}

// Fetched notes that the submitter of an ended job fetched its output
// folder: the copies beyond the keeper's may go.
func (s *Service) Fetched(ctx context.Context, ref *pb.JobRef) (*pb.Record, error) {
	from, err := callerID(ctx)
	if err != nil {
		return nil, err
	}
	e, r, ok := s.get(ref.Id)
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "member %s knows no job %s", s.cfg.Name, ref.Id)
	case r.Submitter != from.String():
		return nil, status.Errorf(codes.PermissionDenied, "only the submitter of job %s (node %s) says it fetched the output; this is node %s", shortJob(ref.Id), r.Submitter, from)
	case !Ended(r.State):
		return nil, status.Errorf(codes.FailedPrecondition, "job %s is still running", shortJob(ref.Id))
	}
	if !r.Fetched {
		s.update(e, func(r *pb.Record) { r.Fetched = true })
		s.log.Info("the submitter fetched the job's output", "job", shortJob(ref.Id))
		s.pokeKeep()
	}
	_, r, _ = s.get(ref.Id)
	return r, nil
}

// copyOutput copies the output folder out of owned job e, ended as r,
// to Copies other members (its holders first) and tells them where the
// copies are.
func (s *Service) copyOutput(e *entry, r *pb.Record, out string) {
	s.measure(r.Id)
	// Each copy says at least that the owner holds the output, so that a
	// holder the full list below does not reach still finds a keeper.
	on := []string{s.cfg.ID.String()}
	sent := clone(r)
	sent.ResultsOn = on
	held, _ := s.replicate(s.life, sent, KindResults, out, r.Holders, "")
	live := map[string]Member{}
	for _, m := range s.cfg.Members() {
		live[m.ID] = m
		if slices.Contains(held, m.Name) {
			on = append(on, m.ID)
		}
	}
	s.update(e, func(rec *pb.Record) { rec.ResultsOn = on })
	_, r, _ = s.get(r.Id)
	s.pushRecord(s.life, r, live)
	s.log.Info("results copied", "job", shortJob(r.Id), "holders", held)
}

// pushRecord sends r alone to the live members it lists as holding the
// output, but this one.
func (s *Service) pushRecord(ctx context.Context, r *pb.Record, live map[string]Member) {
	r = clone(r)
	r.Results = false
	for _, id := range r.ResultsOn {
		m, ok := live[id]
		if !ok || id == s.cfg.ID.String() {
			continue
		}
		if err := s.hold(ctx, m, r, KindRecord, nil); err != nil {
			s.log.Info("member not told where a job's output is", "job", shortJob(r.Id), "member", m.Name, "err", status.Convert(err).Message())
		}
	}
}

// keepLoop looks after the copies of ended jobs until ctx ends.
func (s *Service) keepLoop(ctx context.Context) {
	every := min(max(s.cfg.LostAfter/4, 100*time.Millisecond), 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.keep.poke:
		}
		s.tendAll(ctx, time.Now())
	}
}

// tendAll looks at every ended job this member keeps something of.
func (s *Service) tendAll(ctx context.Context, now time.Time) {
	live := map[string]Member{}
	for _, m := range s.cfg.Members() {
		if m.ID != "" && m.ID != s.cfg.ID.String() {
			live[m.ID] = m
		}
	}
	s.mu.Lock()
	for id := range live {
		s.keep.seen[id] = now
	}
	for k, at := range s.keep.refused {
		if now.Sub(at) >= refusedFor {
			delete(s.keep.refused, k)
		}
	}
	var todo []*pb.Record
	var uncopied []string
	for _, e := range s.jobs {
		switch {
		case !Ended(e.rec.State):
		case len(e.rec.ResultsOn) > 0:
			todo = append(todo, s.view(e))
		case e.owned && time.UnixMilli(e.rec.EndedMs).Before(s.keep.since):
			// It ended before this member stopped, which it did before it
			// copied the output.
			uncopied = append(uncopied, e.rec.Id)
		}
	}
	s.mu.Unlock()
	for _, id := range uncopied {
		if e, r, ok := s.get(id); ok && r.Results {
			s.copyOutput(e, r, filepath.Join(e.dir, "out"))
		}
	}
	for _, r := range todo {
		if ctx.Err() != nil {
			return
		}
		s.tend(ctx, r, live, now)
	}
}

// holders sorts the members holding r's output into present (this one
// or live; in rank order), pending (not live, not yet gone) and gone.
func (s *Service) holders(r *pb.Record, live map[string]Member, now time.Time) (present, pending, gone []string) {
	me := s.cfg.ID.String()
	on := slices.DeleteFunc(slices.Clone(r.ResultsOn), func(id string) bool { return id == me })
	if r.Results {
		on = append(on, me)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range on {
		_, ok := live[id]
		switch {
		case id == me || ok:
			present = append(present, id)
		case now.Sub(latest(s.keep.seen[id], s.keep.since)) > s.cfg.LostAfter:
			gone = append(gone, id)
		default:
			pending = append(pending, id)
		}
	}
	return rankIDs(r.Id, present), pending, gone
}

// rankIDs orders node IDs as Rank orders their members.
func rankIDs(jobID string, ids []string) []string {
	ms := make([]Member, len(ids))
	for i, id := range ids {
		ms[i] = Member{ID: id}
	}
	out := make([]string, len(ids))
	for i, m := range Rank(jobID, ms) {
		out[i] = m.ID
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// keepPlan is what a member does about an ended job's copies, decided
// by planKeep from its view and applied by tend.
type keepPlan struct {
	// Keeper is the first present holder in the job's rank ("" if none).
	Keeper string
	// Drop: drop this member's copy once Keeper confirms it holds the
	// output.
	Drop bool
	// Copy is how many more members should hold the output (this member
	// is the keeper and makes them).
	Copy int
	// Prune: results_on lists holders that are gone; the keeper rewrites
	// it.
	Prune bool
}

// planKeep decides for member me, given the holders of an ended job's
// output as holders sorts them, whether it was fetched, and how many
// members should hold it until then.
func planKeep(me string, fetched bool, present, pending, gone []string, want int) keepPlan {
	if len(present) == 0 {
		return keepPlan{}
	}
	p := keepPlan{Keeper: present[0]}
	switch {
	case fetched:
		p.Drop = p.Keeper != me
	case p.Keeper == me:
		p.Copy = max(want-len(present)-len(pending), 0)
		p.Prune = len(gone) > 0
	}
	return p
}

// tend keeps ended job r's output on 1+Copies members until its
// submitter fetched it, and on its keeper alone after.
func (s *Service) tend(ctx context.Context, r *pb.Record, live map[string]Member, now time.Time) {
	present, pending, gone := s.holders(r, live, now)
	p := planKeep(s.cfg.ID.String(), r.Fetched, present, pending, gone, 1+s.cfg.Copies)
	if p.Drop {
		s.dropCopy(ctx, r, live[p.Keeper])
	}
	if p.Copy == 0 && !p.Prune {
		return
	}
	have := append(present, pending...)
	added := s.copyAgain(ctx, r, have, p.Copy, live, now)
	if len(added) == 0 && !p.Prune {
		return
	}
	on := append(have, added...)
	e, _, ok := s.get(r.Id)
	if !ok {
		return
	}
	s.update(e, func(rec *pb.Record) { rec.ResultsOn = on })
	if p.Prune {
		s.log.Info("copies of a job's output lost with their members", "job", shortJob(r.Id), "gone", gone, "now on", len(on))
	}
	if _, r, ok = s.get(r.Id); ok {
		s.pushRecord(ctx, r, live)
	}
}

// copyAgain copies r's output to up to n members in rank order that
// hold none; it returns the node IDs of those that took it.
func (s *Service) copyAgain(ctx context.Context, r *pb.Record, have []string, n int, live map[string]Member, now time.Time) []string {
	if n <= 0 {
		return nil
	}
	files, err := DirFiles(filepath.Join(s.jobDir(r.Id), "out"))
	if err != nil {
		s.log.Warn("job output not copied again", "job", shortJob(r.Id), "err", err)
		return nil
	}
	ms := make([]Member, 0, len(live))
	for _, m := range live {
		ms = append(ms, m)
	}
	rec := clone(r)
	rec.Results = false
	var added []string
	for _, m := range Rank(r.Id, ms) {
		if len(added) >= n || ctx.Err() != nil {
			break
		}
		key := r.Id + "/" + m.ID
		s.mu.Lock()
		refused := now.Sub(s.keep.refused[key]) < refusedFor
		s.mu.Unlock()
		if m.ID == r.Submitter || slices.Contains(have, m.ID) || refused {
			continue
		}
		rec.ResultsOn = append(append(slices.Clone(have), added...), m.ID)
		if err := s.hold(ctx, m, rec, KindResults, files); err != nil {
			s.refusedCopy(r.Id, KindResults, m.Name, err)
			s.mu.Lock()
			s.keep.refused[key] = now
			s.mu.Unlock()
			continue
		}
		s.log.Info("job output copied again", "job", shortJob(r.Id), "member", m.Name)
		added = append(added, m.ID)
	}
	return added
}

// dropCopy drops this member's copy of fetched job r (output folder and
// bundle; the record stays until --retain) once keeper confirms it holds
// the output.
func (s *Service) dropCopy(ctx context.Context, r *pb.Record, keeper Member) {
	dir := s.jobDir(r.Id)
	if !r.Results && !exists(filepath.Join(dir, "bundle")) {
		return
	}
	if !s.holdsOutput(ctx, keeper, r.Id) {
		return
	}
	s.mu.Lock()
	e, ok := s.jobs[r.Id]
	if !ok || !Ended(e.rec.State) {
		s.mu.Unlock()
		return
	}
	e.rec.ResultsOn, e.rec.Fetched = []string{keeper.ID}, true
	rec := clone(e.rec)
	s.mu.Unlock()
	for _, sub := range []string{"out", "bundle"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			s.log.Warn("copy not dropped", "job", shortJob(r.Id), "err", err)
		}
	}
	if err := writeRecord(dir, rec); err != nil {
		s.log.Warn("job record not saved", "job", shortJob(r.Id), "err", err)
	}
	s.measure(r.Id)
	s.log.Info("copy dropped: the submitter fetched the job's output", "job", shortJob(r.Id), "kept on", keeper.Name)
}

// holdsOutput asks member m whether it holds job id's output folder.
func (s *Service) holdsOutput(ctx context.Context, m Member, id string) bool {
	if m.Addr == "" {
		return false
	}
	cc, err := s.cfg.Dial(m.Addr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep, err := pb.NewJobsClient(cc).List(ctx, &pb.ListRequest{})
	if err != nil {
		return false
	}
	for _, j := range rep.Jobs {
		if j.Id == id {
			return j.Results
		}
	}
	return false
}
