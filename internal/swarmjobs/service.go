package swarmjobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/internal/trust"
)

// Member is another member of the swarm, as the membership gossips it.
type Member struct {
	Name string
	ID   string // node ID
	Addr string // gRPC address
}

// Job is a job this member owns, as its runner gets it: the files of its
// bundle and the output folder to write.
type Job struct {
	ID     string
	Name   string
	Spec   string            // the spec file (its relative paths mean nothing: use Plugin and Inputs)
	Plugin string            // the plugin executable
	Inputs map[string]string // input name -> file
	Out    string            // output folder
	// Epoch is the ownership's (Record.epoch); Replicate copies a
	// snapshot of the job database (and the task outputs) to the job's
	// successors; Departed names the owner this member took over from.
	Epoch     uint64
	Replicate func(ctx context.Context, snapshot string) error
	Departed  []string
	// PluginKey is the plugin's source key when the bundle says it
	// (PluginKeyFile): the job was a plain run's, its plugin built there.
	PluginKey string
}

// Runner runs a job to its end, resuming what its output folder holds.
// progress is called as tasks end. It returns nil when every task is
// done, an error otherwise; when ctx ends it returns promptly.
type Runner func(ctx context.Context, j Job, progress func(done, failed, running, total int)) error

// Config configures a Service.
type Config struct {
	// Dir holds a folder per job (DATA/jobs).
	Dir string
	// Name, ID and Addr are this member's.
	Name string
	ID   trust.NodeID
	Addr string
	// NoOwn: this member refuses to own jobs (p2pc join --no-own); it
	// still holds copies.
	NoOwn bool
	// Retain is how long ended jobs (and copies of jobs whose end this
	// member never heard of) are kept (default 7 days).
	Retain time.Duration
	// Copies is how many other members hold a job's bundle and results
	// (default 2; at least 1 is required).
	Copies int
	// Disk caps the bytes of the job folders this member keeps (bundles,
	// output folders); 0: no cap. A copy that does not fit is refused.
	Disk int64
	// LostAfter: a member holding an output folder that has not been a
	// live member for this long has lost its copy (default 2 minutes).
	LostAfter time.Duration
	// Run runs the jobs this member owns.
	Run Runner
	// Members returns the other live members.
	Members func() []Member
	// Gone reports whether the membership has no trace of a member (not
	// alive, not suspect: declared dead, or never seen), by node ID when
	// id is not empty, else by name: a held job whose owner is gone is
	// taken over by its first holder not gone (takeover.go). nil: nothing
	// is taken over.
	Gone func(name, id string) bool
	// Dial returns a connection to a member's gRPC address.
	Dial   func(addr string) (grpc.ClientConnInterface, error)
	Logger *slog.Logger
}

// Service serves the Jobs protocol on a member and runs the jobs it owns.
// Lock order: Service.stateMu, then Service.mu.
type Service struct {
	pb.UnimplementedJobsServer
	cfg Config
	log *slog.Logger
	// life is the context of the coordinators (Start's).
	life context.Context
	wg   sync.WaitGroup

	mu   sync.Mutex
	jobs map[string]*entry
	keep keeping // copies and disk use (retain.go), under mu
	// known: the members last seen alive, by name (their addresses while
	// they are suspect).
	known map[string]Member
	// stateMu serialises moving a journal copy into a state folder and
	// a takeover's turning that folder into the output folder.
	stateMu sync.Mutex
	// copies counts the copies sent, per job (sent.go).
	copies sentCounter
}

// entry is a job this member owns or holds.
type entry struct {
	rec *pb.Record
	dir string
	// owned: this member runs its coordinator.
	owned bool
	// cancel ends the coordinator; canceled says Cancel asked for it.
	cancel   context.CancelFunc
	canceled bool
	// changed is closed and replaced at each change of rec.
	changed chan struct{}
	// ended is closed when the coordinator returned.
	ended chan struct{}
	saved time.Time
	// steppedDown: a later owner exists, the coordinator was stopped for
	// it (takeover.go); departed: the owner this member took over from;
	// sent: per holder, the task outputs it holds already.
	steppedDown bool
	departed    []string
	sent        map[string]map[string]bool
	// replacing: new holders are being placed, last at replaced
	// (holders.go).
	replacing bool
	replaced  time.Time
}

var _ pb.JobsServer = (*Service)(nil)

// New returns a service; Register it, then Start it.
func New(cfg Config) (*Service, error) {
	if cfg.Retain <= 0 {
		cfg.Retain = 7 * 24 * time.Hour
	}
	if cfg.Copies <= 0 {
		cfg.Copies = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("jobs folder: %w", err)
	}
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = 2 * time.Minute
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "swarmjobs"), jobs: map[string]*entry{}, keep: newKeeping()}, nil
}

// Register serves the Jobs protocol on s.
func (s *Service) Register(r grpc.ServiceRegistrar) { pb.RegisterJobsServer(r, s) }

// Start reads the jobs kept on disk, resumes those this member owns and
// were running, and sweeps what --retain let go, until ctx ends. Wait
// waits for the coordinators once ctx ended.
func (s *Service) Start(ctx context.Context) error {
	s.life = ctx
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("jobs folder: %w", err)
	}
	for _, de := range ents {
		if !de.IsDir() || de.Name()[0] == '.' {
			continue
		}
		dir := filepath.Join(s.cfg.Dir, de.Name())
		rec, err := readRecord(dir)
		if err != nil {
			s.log.Warn("job folder without a readable record: removed", "dir", dir, "err", err)
			os.RemoveAll(dir)
			continue
		}
		e := &entry{rec: rec, dir: dir, owned: rec.OwnerId == s.cfg.ID.String(), changed: make(chan struct{}), ended: make(chan struct{})}
		s.jobs[rec.Id] = e
		if e.owned && !Ended(rec.State) {
			s.wg.Go(func() { s.resumeOwned(ctx, e) })
		} else {
			close(e.ended)
		}
	}
	s.measureAll()
	s.wg.Go(func() { s.sweepLoop(ctx) })
	s.wg.Go(func() { s.keepLoop(ctx) })
	s.wg.Go(func() { s.takeoverLoop(ctx) })
	return nil
}

// Wait waits for the coordinators and the sweeper (after Start's context
// ended).
func (s *Service) Wait() { s.wg.Wait() }

func (s *Service) jobDir(id string) string { return filepath.Join(s.cfg.Dir, id) }

// get returns a copy of the record of job id and its entry.
func (s *Service) get(id string) (*entry, *pb.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[id]
	if !ok {
		return nil, nil, false
	}
	return e, s.view(e), true
}

// view is e's record as this member answers it (s.mu held).
func (s *Service) view(e *entry) *pb.Record {
	r := clone(e.rec)
	r.Results = Ended(r.State) && exists(filepath.Join(e.dir, "out"))
	return r
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// update changes e's record with f (under s.mu), wakes its watchers and
// saves it (at most once a second while the job runs).
func (s *Service) update(e *entry, f func(r *pb.Record)) {
	s.mu.Lock()
	f(e.rec)
	close(e.changed)
	e.changed = make(chan struct{})
	save := Ended(e.rec.State) || time.Since(e.saved) > time.Second
	var r *pb.Record
	if save {
		e.saved = time.Now()
		r = clone(e.rec)
	}
	s.mu.Unlock()
	if r != nil {
		if err := writeRecord(e.dir, r); err != nil {
			s.log.Warn("job record not saved", "job", r.Id[:12], "err", err)
		}
	}
}

func callerID(ctx context.Context) (trust.NodeID, error) {
	id, err := trust.PeerIDFromContext(ctx)
	if err != nil {
		return id, status.Errorf(codes.Unauthenticated, "jobs: %v", err)
	}
	return id, nil
}

// Submit makes this member the owner of the job streamed in.
func (s *Service) Submit(stream grpc.ClientStreamingServer[pb.Bundle, pb.Placed]) error {
	from, err := callerID(stream.Context())
	if err != nil {
		return err
	}
	if s.cfg.NoOwn {
		return status.Errorf(codes.FailedPrecondition, "member %s owns no job (p2pc join --no-own)", s.cfg.Name)
	}
	h, err := recvHeader(stream.Recv)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "submit: %v", err)
	}
	if h.Kind != KindJob || !validID(h.Record.Id) || h.Record.Name == "" {
		return status.Errorf(codes.InvalidArgument, "submit: a job bundle with a job ID and name is expected (kind %q, id %q)", h.Kind, h.Record.Id)
	}
	id := h.Record.Id
	if _, r, ok := s.get(id); ok {
		// The same job again (same spec, plugin and inputs), owned here or
		// held here for its owner: it is that one.
		return stream.SendAndClose(&pb.Placed{Record: r})
	}
	release, err := s.reserve(id, h.Size)
	if err != nil {
		return err
	}
	defer release()
	dir := s.jobDir(id)
	if err := intoDir(stream.Recv, filepath.Join(dir, "bundle")); err != nil {
		os.RemoveAll(dir)
		return status.Errorf(codes.InvalidArgument, "submit: job %s: %v", id[:12], err)
	}
	if _, err := bundleJob(dir, id, h.Record.Name); err != nil {
		os.RemoveAll(dir)
		return status.Errorf(codes.InvalidArgument, "submit: %v", err)
	}
	rec := &pb.Record{
		Id: id, Name: h.Record.Name, State: StateRunning, Owner: s.cfg.Name, OwnerId: s.cfg.ID.String(), OwnerAddr: s.cfg.Addr,
		Epoch: 1, Submitter: from.String(), CreatedMs: time.Now().UnixMilli(),
	}
	var refused []string
	rec.Holders, refused = s.replicate(stream.Context(), rec, KindJob, filepath.Join(dir, "bundle"), nil, from.String())
	if len(rec.Holders) == 0 {
		os.RemoveAll(dir)
		return status.Errorf(codes.Unavailable, "submit: no other member of the swarm could hold a copy of job %s (a job handed to the swarm lives on at least two members)", id[:12])
	}
	if err := writeRecord(dir, rec); err != nil {
		os.RemoveAll(dir)
		return status.Errorf(codes.Internal, "submit: %v", err)
	}
	e := &entry{rec: rec, dir: dir, owned: true, changed: make(chan struct{}), ended: make(chan struct{}), saved: time.Now()}
	s.mu.Lock()
	s.jobs[id] = e
	s.mu.Unlock()
	s.measure(id)
	s.startRun(e)
	s.log.Info("owning a job", "job", id[:12], "name", rec.Name, "submitter", rec.Submitter, "holders", rec.Holders)
	_, r, _ := s.get(id)
	return stream.SendAndClose(&pb.Placed{Record: r, Refused: refused})
}

func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// bundleJob describes the bundle of job id in its folder dir.
func bundleJob(dir, id, name string) (Job, error) {
	b := filepath.Join(dir, "bundle")
	j := Job{ID: id, Name: name, Spec: filepath.Join(b, SpecFile), Plugin: filepath.Join(b, PluginFile), Inputs: map[string]string{}, Out: filepath.Join(dir, "out")}
	for _, f := range []string{j.Spec, j.Plugin} {
		if !exists(f) {
			return j, fmt.Errorf("job %s: the bundle has no %s", id[:12], filepath.Base(f))
		}
	}
	key, err := readPluginKey(b)
	if err != nil {
		return j, err
	}
	j.PluginKey = key
	ins, err := os.ReadDir(filepath.Join(b, InputsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return j, err
	}
	for _, in := range ins {
		j.Inputs[in.Name()] = filepath.Join(b, InputsDir, in.Name())
	}
	return j, nil
}

// replicate sends a bundle (the job's, or its output folder) with rec to
// up to Copies other members, those in prefer first, then the others in
// the job's rank, never to skip (the submitter); it returns those that
// took it, and why others did not.
func (s *Service) replicate(ctx context.Context, rec *pb.Record, kind, dir string, prefer []string, skip string) (held, refused []string) {
	files, err := DirFiles(dir)
	if err != nil {
		s.log.Warn("copy not sent", "job", rec.Id[:12], "kind", kind, "err", err)
		return nil, nil
	}
	var order []Member
	ranked := Rank(rec.Id, s.cfg.Members())
	for _, name := range prefer {
		for _, m := range ranked {
			if m.Name == name {
				order = append(order, m)
			}
		}
	}
	for _, m := range ranked {
		if !containsName(order, m.Name) {
			order = append(order, m)
		}
	}
	for _, m := range order {
		if len(held) == s.cfg.Copies {
			break
		}
		if m.ID == s.cfg.ID.String() || m.ID == skip || m.Name == s.cfg.Name {
			continue
		}
		if err := s.hold(ctx, m, rec, kind, files); err != nil {
			s.refusedCopy(rec.Id, kind, m.Name, err)
			refused = append(refused, fmt.Sprintf("member %s did not take a copy of job %s: %s", m.Name, rec.Id[:12], status.Convert(err).Message()))
			continue
		}
		held = append(held, m.Name)
	}
	return held, refused
}

func containsName(ms []Member, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

func (s *Service) hold(ctx context.Context, m Member, rec *pb.Record, kind string, files []File) error {
	cc, err := s.cfg.Dial(m.Addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	st, err := pb.NewJobsClient(cc).Hold(ctx)
	if err != nil {
		return err
	}
	if err := sendBundle(s.copies.counting(rec.Id, kind, st.Send), &pb.Header{Kind: kind, Record: rec, Size: filesSize(files)}, files); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = st.CloseAndRecv()
	return err
}

// Hold keeps a copy sent by a job's owner.
func (s *Service) Hold(stream grpc.ClientStreamingServer[pb.Bundle, pb.Held]) error {
	from, err := callerID(stream.Context())
	if err != nil {
		return err
	}
	h, err := recvHeader(stream.Recv)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "hold: %v", err)
	}
	rec := h.Record
	if !validID(rec.Id) || !s.maySend(from.String(), h.Kind, rec) {
		return status.Errorf(codes.PermissionDenied, "hold: only a job's owner, or a member holding its output once it ended, sends its copies (job %q, owner %q, caller %s)", rec.Id, rec.OwnerId, from)
	}
	if h.Kind == KindRecord || h.Kind == KindEnded {
		hold := s.holdRecord
		if h.Kind == KindEnded {
			hold = s.holdEnded
		}
		if err := hold(rec); err != nil {
			return err
		}
		return stream.SendAndClose(&pb.Held{})
	}
	if e, r, ok := s.get(rec.Id); ok {
		switch {
		case rec.Epoch < r.Epoch:
			// Fencing: a copy from an owner that was superseded.
			return status.Errorf(codes.PermissionDenied, "hold: %s: job %s is owned at epoch %d by %s, the copy is of epoch %d", staleOwner, rec.Id[:12], r.Epoch, r.Owner, rec.Epoch)
		case e.owned && rec.Epoch > r.Epoch:
			s.stepDown(e, rec)
		case e.owned && rec.Epoch > 1 && rec.OwnerId < r.OwnerId:
			// Two owners of one epoch (each side of a partition took the
			// job over): the lower node ID keeps it, as peers decide.
			s.stepDown(e, rec)
		case e.owned && rec.Epoch > 1:
			return status.Errorf(codes.PermissionDenied, "hold: %s: job %s has two owners of epoch %d; %s, of the lower node ID, keeps it", staleOwner, rec.Id[:12], r.Epoch, s.cfg.Name)
		case e.owned:
			// Submitted twice through different memberships: this one
			// keeps its own.
			return status.Errorf(codes.FailedPrecondition, "hold: member %s owns job %s itself (epoch %d)", s.cfg.Name, rec.Id[:12], r.Epoch)
		}
	}
	into, sub := intoDir, "bundle"
	switch h.Kind {
	case KindJob:
	case KindResults:
		sub = "out"
	case KindState:
		into = func(recv func() (*pb.Bundle, error), dst string) error { return mergeInto(recv, dst, &s.stateMu) }
		sub = stateDir
	default:
		return status.Errorf(codes.InvalidArgument, "hold: unknown kind %q", h.Kind)
	}
	release, err := s.reserve(rec.Id, h.Size)
	if err != nil {
		return err
	}
	defer release()
	dir := s.jobDir(rec.Id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return status.Errorf(codes.Internal, "hold: %v", err)
	}
	if err := into(stream.Recv, filepath.Join(dir, sub)); err != nil {
		return status.Errorf(codes.InvalidArgument, "hold: job %s: %v", rec.Id[:12], err)
	}
	s.mu.Lock()
	e, ok := s.jobs[rec.Id]
	if !ok {
		e = &entry{dir: dir, changed: make(chan struct{}), ended: make(chan struct{})}
		close(e.ended)
		s.jobs[rec.Id] = e
	}
	merge(e, rec)
	r := clone(e.rec)
	s.mu.Unlock()
	s.measure(rec.Id)
	if err := writeRecord(dir, r); err != nil {
		return status.Errorf(codes.Internal, "hold: %v", err)
	}
	return stream.SendAndClose(&pb.Held{})
}

// List returns the jobs this member owns or holds.
func (s *Service) List(ctx context.Context, _ *pb.ListRequest) (*pb.ListReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pb.ListReply{DiskCap: s.cfg.Disk, DiskUsed: s.keep.used()}
	for _, e := range s.jobs {
		out.Jobs = append(out.Jobs, s.view(e))
	}
	return out, nil
}

// Watch streams the record of a job as it changes, until it ended.
func (s *Service) Watch(ref *pb.JobRef, stream grpc.ServerStreamingServer[pb.Record]) error {
	for {
		s.mu.Lock()
		e, ok := s.jobs[ref.Id]
		if !ok {
			s.mu.Unlock()
			return status.Errorf(codes.NotFound, "member %s knows no job %s", s.cfg.Name, ref.Id)
		}
		r, changed, owned := s.view(e), e.changed, e.owned
		s.mu.Unlock()
		if err := stream.Send(r); err != nil {
			return err
		}
		if Ended(r.State) {
			return nil
		}
		if !owned {
			return status.Errorf(codes.FailedPrecondition, "member %s holds a copy of job %s but does not run it (its owner is %s)", s.cfg.Name, ref.Id[:12], r.Owner)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
		// At most five updates a second.
		select {
		case <-time.After(200 * time.Millisecond):
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// Fetch streams the output folder of an ended job.
func (s *Service) Fetch(ref *pb.JobRef, stream grpc.ServerStreamingServer[pb.Bundle]) error {
	_, r, ok := s.get(ref.Id)
	if !ok {
		return status.Errorf(codes.NotFound, "member %s knows no job %s", s.cfg.Name, ref.Id)
	}
	if !Ended(r.State) {
		return status.Errorf(codes.FailedPrecondition, "job %s is still running (%d of %d tasks done)", ref.Id[:12], r.Done, r.Total)
	}
	if !r.Results {
		return status.Errorf(codes.NotFound, "member %s holds no output of job %s", s.cfg.Name, ref.Id[:12])
	}
	files, err := DirFiles(filepath.Join(s.jobDir(ref.Id), "out"))
	if err != nil {
		return status.Errorf(codes.Internal, "fetch: %v", err)
	}
	return sendBundle(stream.Send, &pb.Header{Kind: KindResults, Record: r}, files)
}

// Cancel ends a running job this member owns, for its submitter only.
func (s *Service) Cancel(ctx context.Context, ref *pb.JobRef) (*pb.Record, error) {
	from, err := callerID(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	e, ok := s.jobs[ref.Id]
	if !ok {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "member %s knows no job %s", s.cfg.Name, ref.Id)
	}
	r := s.view(e)
	switch {
	case r.Submitter != from.String():
		s.mu.Unlock()
		return nil, status.Errorf(codes.PermissionDenied, "only the submitter of job %s (node %s) may cancel it; this is node %s", ref.Id[:12], r.Submitter, from)
	case Ended(r.State):
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "job %s has ended already (%s)", ref.Id[:12], r.State)
	case !e.owned:
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "member %s does not run job %s (its owner is %s)", s.cfg.Name, ref.Id[:12], r.Owner)
	}
	e.canceled = true
	e.cancel()
	ended := e.ended
	s.mu.Unlock()
	select {
	case <-ended:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	_, r, _ = s.get(ref.Id)
	return r, nil
}

// startRun runs the coordinator of an owned job in the background; when
// it ends, the record says how and the output folder is copied to the
// holders.
func (s *Service) startRun(e *entry) {
	ctx, cancel := context.WithCancel(s.life)
	e.cancel = cancel
	s.wg.Go(func() {
		defer cancel()
		defer close(e.ended)
		j, err := bundleJob(e.dir, e.rec.Id, e.rec.Name)
		s.mu.Lock()
		j.Epoch, j.Departed = e.rec.Epoch, e.departed
		s.mu.Unlock()
		j.Replicate = func(ctx context.Context, snap string) error {
			if snap == "" {
				return nil // asked whether there are successors: there are
			}
			return s.syncState(ctx, e, snap)
		}
		if err == nil {
			err = s.cfg.Run(ctx, j, func(done, failed, running, total int) {
				s.update(e, func(r *pb.Record) {
					r.Done, r.Failed, r.Running, r.Total = int64(done), int64(failed), int64(running), int64(total)
				})
			})
		}
		s.mu.Lock()
		canceled, stepped := e.canceled, e.steppedDown
		s.mu.Unlock()
		switch {
		case stepped:
			return // a later owner runs it
		case errors.Is(err, ErrFenced):
			s.wg.Go(func() { s.stepDown(e, s.newerElsewhere(s.life, e.rec, 0)) })
			return
		case s.life.Err() != nil && !canceled:
			// This member stops: the job resumes when it starts again.
			return
		}
		s.update(e, func(r *pb.Record) {
			r.EndedMs, r.Running = time.Now().UnixMilli(), 0
			switch {
			case canceled:
				r.State, r.Error = StateCanceled, "canceled by its submitter"
			case err != nil:
				r.State, r.Error = StateFailed, err.Error()
			default:
				r.State = StateComplete
			}
		})
		_, r, _ := s.get(e.rec.Id)
		s.log.Info("owned job ended", "job", r.Id[:12], "state", r.State, "err", r.Error)
		if exists(j.Out) {
			s.copyOutput(e, r, j.Out)
		}
		s.logSent(r)
	})
}

// sweepLoop removes the jobs that --retain let go.
func (s *Service) sweepLoop(ctx context.Context) {
	every := min(max(s.cfg.Retain/100, time.Second), time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sweep(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) sweep(now time.Time) {
	s.mu.Lock()
	var gone []*entry
	for id, e := range s.jobs {
		since := e.rec.EndedMs
		if !Ended(e.rec.State) {
			if e.owned {
				continue
			}
			since = e.rec.CreatedMs // a copy whose end never came
		}
		if now.Sub(time.UnixMilli(since)) > s.cfg.Retain {
			gone = append(gone, e)
			delete(s.jobs, id)
		}
	}
	s.mu.Unlock()
	for _, e := range gone {
		s.log.Info("job let go (--retain)", "job", e.rec.Id[:12], "name", e.rec.Name)
		os.RemoveAll(e.dir)
		s.measure(e.rec.Id)
		s.copies.take(e.rec.Id)
	}
}
