package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Limits on what a coordinator may send.
const (
	maxInputs    = 1024
	maxParams    = 1 << 20
	maxTimeout   = 24 * time.Hour
	inlineOutput = 64 << 10 // output files up to this size travel inline
)

var (
	jobIDRe  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	taskIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	nameRe   = regexp.MustCompile(`^[^/\x00]{1,255}$`)
)

type peerService struct {
	peerpb.UnimplementedPeerServer
	n *Node
}

func (s *peerService) Info(ctx context.Context, req *peerpb.InfoRequest) (*peerpb.InfoResponse, error) {
	n := s.n
	_, free := n.sched.load()
	resp := &peerpb.InfoResponse{
		Proto:     ProtocolVersion,
		Name:      n.cfg.Name,
		Version:   n.cfg.Version,
		Os:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		Slots:     uint32(n.cfg.Slots),
		FreeSlots: uint32(max(free, 0)),
		GrpcAddr:  n.addr,
		Jobs:      uint32(n.sched.jobs()),
	}
	if n.gossipAddr != nil {
		resp.GossipAddr = n.gossipAddr()
	}
	return resp, nil
}

// queued is a lease waiting for (or holding) a slot.
type queued struct {
	lease *peerpb.Lease
	// group: the leases of one batch share it (session.admit).
	group  uint64
	ctx    context.Context
	cancel context.CancelFunc
	// When it came and how long the tasks had been frozen then, and
	// whether the peer gave it up for a pause (volunteer.go).
	admitted time.Time
	frozen0  time.Duration
	paused   atomic.Bool
	// orphan: its ID in the node's keeper once its session is lost and it
	// runs on (guarded by the session's mu).
	orphan uint64
}

// session is one coordinator's job on this node.
type session struct {
	n       *Node
	ctx     context.Context // the session's: ends with its stream
	hello   *peerpb.Hello
	log     *slog.Logger
	job     *jobFiles  // nil until prepare
	served  *ServedJob // its job as Node.Served lists it; nil until welcomed
	pool    *pluginhost.Pool
	inputs  []sdk.File
	timeout time.Duration

	outbox  chan *peerpb.FromPeer
	credits atomic.Int64
	kick    chan struct{}

	// Guarded by the scheduler's mutex.
	queue   []*queued
	groups  int // batches in queue
	running int
	// runningTasks counts the leases of the running batches.
	runningTasks int
	credited     int
	ready        bool

	// base is the parent of the leases' contexts: not the stream's, so
	// that running tasks may outlive a broken session (keep.go); stop
	// ends it. gone is closed when the session's stream has ended, left
	// when Work returns; supersede ends the session (a newer one of its
	// run came).
	base      context.Context
	stop      context.CancelFunc
	gone      chan struct{}
	left      chan struct{}
	supersede context.CancelFunc

	// Used by the receive loop alone: the current batch and how many of
	// its leases are still to come.
	group, groupLeft uint64

	mu       sync.Mutex // taken before the keeper's (keep.go), never under sched's
	active   map[uint64]*queued
	pending  map[uint64]chan *peerpb.HostReply // host calls awaiting the coordinator
	nextCall uint64
	// recent are the results finished and not acknowledged (keep.go),
	// while the session lives; orphaned: the stream has ended, results
	// finished now go to the node's keeper (the tasks running then are
	// the keeper's orphans, queued.orphan); over: the coordinator said
	// the job is over (End), nothing is kept; idle is signalled when
	// active empties.
	recent   recentList
	orphaned bool
	over     bool
	idle     *sync.Cond
}

func (s *peerService) Work(stream peerpb.Peer_WorkServer) error {
	n := s.n
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "work: the first message must be Hello")
	}
	// The coordinator is who its handshake proved; the name in Hello is
	// only what it says.
	coordID, err := trust.PeerIDFromContext(stream.Context())
	if err != nil {
		return status.Errorf(codes.Unauthenticated, "work: %v", err)
	}
	refuse := func(reason string) error {
		n.mu.Lock()
		n.stats.Refused++
		n.mu.Unlock()
		n.log.Warn("refused a job", "job", short(hello.JobId), "coordinator", hello.Coordinator, "coordinator_id", coordID.String(), "reason", reason)
		return stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Refuse{Refuse: &peerpb.Refuse{Reason: reason}}})
	}
	if err := checkHello(hello); err != nil {
		return refuse(err.Error())
	}
	if len(n.cfg.Submitters) > 0 && !slices.Contains(n.cfg.Submitters, coordID) {
		return refuse(fmt.Sprintf("submitter %s is not among this peer's --submitters", coordID))
	}
	if hello.PluginOs != runtime.GOOS || hello.PluginArch != runtime.GOARCH {
		return refuse(fmt.Sprintf("plugin is built for %s/%s, this peer is %s/%s", hello.PluginOs, hello.PluginArch, runtime.GOOS, runtime.GOARCH))
	}
	if n.cfg.Slots == 0 {
		return refuse("this node takes no work (0 slots)")
	}
	if hello.Network && !n.cfg.AllowNetwork {
		return refuse("the job asks for the network (sandbox.network) and this peer was not started with --allow-network")
	}
	if reason := n.misfit(hello); reason != "" {
		return refuse(reason)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sess := &session{
		n:       n,
		ctx:     ctx,
		hello:   hello,
		log:     n.log.With("job", short(hello.JobId), "coordinator", hello.Coordinator),
		timeout: time.Duration(hello.TimeoutMs) * time.Millisecond,
		outbox:  make(chan *peerpb.FromPeer, 256),
		kick:    make(chan struct{}, 1),
		active:  map[uint64]*queued{},
		pending: map[uint64]chan *peerpb.HostReply{},
		gone:    make(chan struct{}),
		left:    make(chan struct{}),
	}
	sess.supersede = cancel
	defer close(sess.left)
	sess.idle = sync.NewCond(&sess.mu)
	sess.recent.acks = hello.Acks
	sess.base, sess.stop = context.WithCancel(n.life)
	defer sess.stop()
	err = sess.prepare(ctx)
	defer sess.cleanup()
	if err != nil {
		return refuse(peerpb.RefusePrepare + plain.Error(err).Error())
	}
	sess.pool.Warm() // a process ready before the first lease arrives
	// What the job's lost sessions left here: the results they finished,
	// handed over now, and the tasks they still run, announced in Welcome
	// (the coordinator leases them to nobody) and handed over as each
	// ends.
	key := keepKey(hello)
	if err := sess.takeOver(ctx, key); err != nil {
		return err
	}
	defer n.keep.leave(key, sess)
	handovers, count, running, watch := n.keep.watch(key)
	defer n.keep.unwatch(key, watch)
	if err := stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Welcome{Welcome: &peerpb.Welcome{Name: n.cfg.Name, Slots: uint32(n.cfg.Slots), Handovers: uint32(count), Acks: true, Running: running}}}); err != nil {
		return err
	}
	n.mu.Lock()
	n.stats.Sessions++
	n.mu.Unlock()
	sess.served = n.serveStart(hello, coordID)
	defer n.serveEnd(sess.served)
	sess.log.Info("job session started")
	if err := sess.handOver(stream, handovers); err != nil {
		return err
	}
	if len(running) > 0 {
		sess.log.Info("tasks of the job's lost sessions still run here; each is handed over as it ends", "running", len(running))
	}

	sendErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sendErr <- sess.sender(ctx, stream)
	}()
	go func() {
		defer wg.Done()
		sess.handOverOrphans(ctx, watch, len(running))
	}()
	n.sched.add(sess)
	n.sched.setReady(sess)
	err = sess.receive(ctx, stream, sendErr)
	cancel()
	sess.end(n.sched.remove(sess))
	wg.Wait()
	sess.log.Info("job session ended", "err", plain.Error(err))
	sess.waitOrphans()
	return err
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func checkHello(h *peerpb.Hello) error {
	switch {
	case h.Proto != ProtocolVersion:
		return fmt.Errorf("protocol version %d is not spoken here (this peer speaks %d)", h.Proto, ProtocolVersion)
	case !jobIDRe.MatchString(h.JobId):
		return errors.New("malformed job id")
	case h.Plugin == nil || len(h.Plugin.FileId) != blocks.IDSize || len(h.Plugin.Digest) != 32:
		return errors.New("malformed plugin reference")
	case h.TimeoutMs <= 0 || time.Duration(h.TimeoutMs)*time.Millisecond > maxTimeout:
		return fmt.Errorf("task timeout %dms out of range", h.TimeoutMs)
	case len(h.Inputs) > maxInputs:
		return fmt.Errorf("%d inputs, at most %d", len(h.Inputs), maxInputs)
	case h.CoordinatorAddr == "":
		return errors.New("no coordinator address")
	}
	seen := map[string]bool{}
	for _, in := range h.Inputs {
		if in == nil || !nameRe.MatchString(in.Name) || in.Name == "." || in.Name == ".." || len(in.FileId) != blocks.IDSize || seen[in.Name] {
			return errors.New("malformed or duplicate input reference")
		}
		seen[in.Name] = true
	}
	return nil
}

// prepare fetches the plugin and the inputs and checks the plugin digest.
func (s *session) prepare(ctx context.Context) error {
	n := s.n
	h := s.hello
	holders := append([]string{h.CoordinatorAddr}, h.Holders...)
	// get fetches the blocks of ref that the store lacks and exports the
	// file to path. A block that rotted in the store fails the export's
	// check: then every block of the file is read (so that each rotten one
	// is quarantined), the missing ones are fetched again from the holders
	// (the submitter at least), and the export is tried once more.
	get := func(ref *peerpb.FileRef, path string, mode os.FileMode) error {
		id, err := blocks.IDFromBytes(ref.FileId)
		if err != nil {
			return err
		}
		if err := n.store.Pin("job-"+h.JobId, id); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f := transfer.NewFetcher(n.store, n.conns, transfer.FetchOptions{Logger: n.cfg.Logger, GiveUp: 20 * time.Second})
		for try := 0; ; try++ {
			if _, err := f.Fetch(ctx, id, holders, nil); err != nil {
				return fmt.Errorf("fetch %s: %w", ref.Name, n.storeFull(err))
			}
			err := blocks.ExportFileMode(ctx, n.store, id, path, mode)
			if err == nil {
				return nil
			}
			if try > 0 || !errors.Is(err, blocks.ErrCorrupt) {
				return fmt.Errorf("export %s: %w", ref.Name, err)
			}
			rotten := quarantineRotten(ctx, n.store, id)
			s.log.Warn("corrupt blocks in the store, quarantined; fetching them again", "file", ref.Name, "rotten", rotten, "err", err)
		}
	}
	var digest [32]byte
	copy(digest[:], h.Plugin.Digest)
	pluginPath := filepath.Join(n.cfg.DataDir, "plugins", hex.EncodeToString(digest[:]), "plugin")
	var err error
	if s.job, err = n.openJob(h.JobId); err != nil {
		return err
	}
	// The pool checks the file against the digest once per file identity:
	// a second job with the same plugin costs a stat, not a hash.
	s.pool = n.pool(s.job, digest, pluginPath, h.Network, h.Memory)
	if s.pool.Check() != nil {
		if err := get(h.Plugin, pluginPath, 0o755); err != nil {
			return fmt.Errorf("plugin: %w", err)
		}
		if err := s.pool.Check(); err != nil {
			os.Remove(pluginPath)
			return fmt.Errorf("plugin binary does not match its digest: %w", err)
		}
	}

	// A copy made for an earlier session of this job is used again only
	// if no task can have changed it.
	reuse := n.inputsImmutable()
	for _, in := range h.Inputs {
		path := filepath.Join(s.job.dir, "inputs", in.Name)
		if _, err := os.Stat(path); err != nil || !reuse {
			if err := get(in, path, 0o444); err != nil {
				return fmt.Errorf("input: %w", err)
			}
		}
		s.inputs = append(s.inputs, sdk.File{Name: in.Name, Path: path})
	}
	return nil
}

// quarantineRotten reads every block of file (Get verifies each and
// quarantines one that no longer matches its ID) and returns how many
// failed: afterwards the store lacks them, and a fetch gets them again.
func quarantineRotten(ctx context.Context, st blocks.Store, file blocks.ID) int {
	m, err := blocks.ReadManifest(ctx, st, file)
	if err != nil {
		return 1 // the manifest itself: now quarantined or missing
	}
	n := 0
	for _, id := range m.Blocks {
		if _, err := st.Get(ctx, id); err != nil {
			n++
		}
	}
	return n
}

// cleanup closes the job's plugin processes and removes its folders
// when no other session of the job is left.
func (s *session) cleanup() {
	if s.job != nil {
		s.n.closeJob(s.job)
	}
}

// pull is called by the scheduler (under its lock): it must not block.
func (s *session) pull(n int) {
	s.credits.Add(int64(n))
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sender is the only goroutine that sends on the stream.
func (s *session) sender(ctx context.Context, stream peerpb.Peer_WorkServer) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			if c := s.credits.Swap(0); c > 0 {
				if err := stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Pull{Pull: &peerpb.Pull{N: uint32(c)}}}); err != nil {
					return err
				}
			}
		case m := <-s.outbox:
			if err := s.sendBatched(stream, m); err != nil {
				return err
			}
		}
	}
}

// Batch limits are the protocol's.
const (
	maxBatch      = peerpb.MaxBatch
	maxBatchBytes = peerpb.MaxBatchBytes
)

// sendBatched sends m; if m is a result, the results queued behind it go
// in the same message, up to maxBatch and maxBatchBytes. Messages keep
// their order: anything else queued ends the batch and follows it.
func (s *session) sendBatched(stream peerpb.Peer_WorkServer, m *peerpb.FromPeer) error {
	r, ok := m.Msg.(*peerpb.FromPeer_Result)
	if !ok {
		return stream.Send(m)
	}
	batch := []*peerpb.Result{r.Result}
	size := proto.Size(r.Result)
	var next *peerpb.FromPeer
	for len(batch) < maxBatch && size < maxBatchBytes && next == nil {
		select {
		case m := <-s.outbox:
			r, ok := m.Msg.(*peerpb.FromPeer_Result)
			if !ok || size+proto.Size(r.Result) > maxBatchBytes {
				next = m // goes alone, after the batch
				break
			}
			batch = append(batch, r.Result)
			size += proto.Size(r.Result)
		default:
			next = &peerpb.FromPeer{} // nothing more queued
		}
	}
	out := m
	if len(batch) > 1 {
		out = &peerpb.FromPeer{Msg: &peerpb.FromPeer_Results{Results: &peerpb.Results{Results: batch}}}
	}
	if err := stream.Send(out); err != nil {
		return err
	}
	if phasetrace.On() {
		for _, r := range batch {
			phasetrace.Mark("p.sent", r.LeaseId)
		}
	}
	if next != nil && next.Msg != nil {
		return stream.Send(next)
	}
	return nil
}

func (s *session) send(ctx context.Context, m *peerpb.FromPeer) {
	select {
	case s.outbox <- m:
	case <-ctx.Done():
	case <-s.gone:
	}
}

// receive handles the coordinator's leases and cancels.
func (s *session) receive(ctx context.Context, stream peerpb.Peer_WorkServer, sendErr <-chan error) error {
	msgs := make(chan *peerpb.ToPeer, 64) // the reader runs ahead of the handler
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if phasetrace.On() {
				for _, l := range m.GetLeases().GetLeases() {
					phasetrace.Mark("p.recv", l.LeaseId)
				}
				if l := m.GetLease(); l != nil {
					phasetrace.Mark("p.recv", l.LeaseId)
				}
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	for {
		select {
		case err := <-sendErr:
			return err
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case m := <-msgs:
			switch x := m.Msg.(type) {
			case *peerpb.ToPeer_Lease:
				s.groupLeft = 0 // a batch never spans messages
				if err := s.admit(ctx, x.Lease); err != nil {
					return err
				}
			case *peerpb.ToPeer_Leases:
				if len(x.Leases.Leases) > maxBatch {
					return status.Errorf(codes.InvalidArgument, "work: %d leases in one message, at most %d", len(x.Leases.Leases), maxBatch)
				}
				s.groupLeft = 0
				for _, l := range x.Leases.Leases {
					if err := s.admit(ctx, l); err != nil {
						return err
					}
				}
			case *peerpb.ToPeer_Cancel:
				s.cancelLease(ctx, x.Cancel.LeaseId)
			case *peerpb.ToPeer_Acks:
				if len(x.Acks.LeaseIds)+len(x.Acks.Tasks) > peerpb.MaxAcks {
					return status.Errorf(codes.InvalidArgument, "work: %d acks in one message, at most %d", len(x.Acks.LeaseIds)+len(x.Acks.Tasks), peerpb.MaxAcks)
				}
				s.ack(x.Acks)
			case *peerpb.ToPeer_End:
				s.jobOver(x.End.State)
				return nil // the coordinator closes the stream
			case *peerpb.ToPeer_Reply:
				s.mu.Lock()
				ch := s.pending[x.Reply.CallId]
				s.mu.Unlock()
				if ch != nil {
					select {
					case ch <- x.Reply:
					default:
					}
				}
			default:
				return status.Errorf(codes.InvalidArgument, "work: unexpected message %T", m.Msg)
			}
		}
	}
}

func (s *session) admit(ctx context.Context, l *peerpb.Lease) error {
	if !taskIDRe.MatchString(l.TaskId) || len(l.Params) > maxParams || !json.Valid(l.Params) {
		return status.Errorf(codes.InvalidArgument, "work: malformed lease %d", l.LeaseId)
	}
	s.mu.Lock()
	if _, dup := s.active[l.LeaseId]; dup {
		s.mu.Unlock()
		return status.Errorf(codes.InvalidArgument, "work: duplicate lease %d", l.LeaseId)
	}
	if s.groupLeft > 0 {
		s.groupLeft-- // the batch goes on
	} else {
		s.group++
		s.groupLeft = uint64(max(l.Batch, 1)) - 1
	}
	lctx, cancel := context.WithCancel(s.base)
	it := &queued{lease: l, ctx: lctx, cancel: cancel, group: s.group, admitted: time.Now(), frozen0: sandbox.FrozenTime()}
	s.active[l.LeaseId] = it
	s.mu.Unlock()
	s.n.mu.Lock()
	s.n.stats.Leases++
	s.n.mu.Unlock()
	s.n.sched.enqueue(s, it)
	phasetrace.Mark("p.admit", l.LeaseId)
	return nil
}

func (s *session) cancelLease(ctx context.Context, id uint64) {
	s.mu.Lock()
	it := s.active[id]
	s.mu.Unlock()
	if it == nil {
		return
	}
	it.cancel()
	if s.n.sched.unqueue(s, id) {
		s.finish(it, &peerpb.Result{LeaseId: id, Outcome: report.OutcomeCanceled, Error: "canceled by the coordinator"})
	}
}

// handBack returns an unstarted lease to the coordinator.
func (s *session) handBack(it *queued, why string) {
	s.n.mu.Lock()
	s.n.stats.Handed++
	s.n.mu.Unlock()
	s.finish(it, &peerpb.Result{LeaseId: it.lease.LeaseId, Outcome: report.OutcomeLost, Error: why})
}

func (s *session) finish(it *queued, res *peerpb.Result) {
	gone := s.keepResult(it, res)
	it.cancel()
	if gone {
		return // kept for the job's next session, if worth it
	}
	// Not the lease's context: it may be canceled already, and the result
	// must still go out. The sender drains the outbox while the session
	// lives; give up after a while if it does not (the timer only then:
	// a result mostly finds room at once).
	for _, f := range s.n.forgeries(res) {
		select {
		case s.outbox <- f:
		default:
		}
	}
	m := &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: res}}
	select {
	case s.outbox <- m:
		return
	default:
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case s.outbox <- m:
	case <-s.gone:
	case <-t.C:
	}
}

// errCoordinatorGone: a task's host call cannot reach the coordinator
// any more (its session broke while the task ran).
var errCoordinatorGone = errors.New("the job's coordinator is gone")

// keepResult notes that a lease is finished: it leaves the session's
// active leases, and a successful result joins the session's recent
// results, or, once the session is gone, the node's keeper (keep.go). It
// reports whether the session is gone (nobody to send the result to).
func (s *session) keepResult(it *queued, res *peerpb.Result) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, active := s.active[it.lease.LeaseId]
	delete(s.active, it.lease.LeaseId)
	if len(s.active) == 0 {
		s.idle.Broadcast()
	}
	switch {
	case active && it.orphan != 0:
		s.n.keep.orphanEnded(keepKey(s.hello), it.orphan, it.lease, res, time.Now())
	case s.n.keep.grace > 0 && keepable(res) && !s.over && !s.orphaned:
		s.recent.add(newKept(it.lease, res, time.Now()))
	}
	return s.orphaned
}

// end is called when the session's stream has ended, with its leases
// that had not started: they are dropped (the coordinator leases them
// again). With Config.KeepResults the running tasks finish, and their
// results, with the ones the session finished lately (sent, but maybe
// not journaled yet), are kept for the job's next session; without it
// (or when the node stops) they are stopped.
func (s *session) end(unstarted []*queued) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range unstarted {
		it.cancel()
		delete(s.active, it.lease.LeaseId)
	}
	s.orphaned = true
	close(s.gone)
	if s.n.keep.grace > 0 && s.n.life.Err() == nil && !s.over {
		recent := s.recent.list()
		s.n.keep.put(keepKey(s.hello), recent...)
		for _, it := range s.active {
			it.orphan = s.n.keep.addOrphan(keepKey(s.hello), orphan{taskID: it.lease.TaskId, attempt: it.lease.Attempt, took: it.admitted})
		}
		if len(s.active) > 0 || len(recent) > 0 {
			s.log.Info("session lost: running tasks finish, results are kept for the job's next session",
				"running", len(s.active), "kept", len(recent), "for", s.n.keep.grace)
		}
	} else {
		for _, it := range s.active {
			it.cancel()
		}
	}
	s.recent = recentList{}
	if len(s.active) == 0 {
		s.idle.Broadcast()
	}
}

// ack forgets the results the coordinator acknowledged: its job database
// holds them.
func (s *session) ack(a *peerpb.Acks) {
	if len(a.LeaseIds) > 0 {
		s.mu.Lock()
		s.recent.ack(a.LeaseIds)
		s.mu.Unlock()
	}
	if len(a.Tasks) > 0 {
		s.n.keep.drop(keepKey(s.hello), a.Tasks)
	}
}

// jobOver: the coordinator ended the job (End): nothing of the run is kept
// any more, and what still runs of it stops when the session ends.
func (s *session) jobOver(state string) {
	s.mu.Lock()
	s.over = true
	running := len(s.active)
	s.recent = recentList{}
	s.mu.Unlock()
	s.n.keep.drop(keepKey(s.hello), nil)
	s.log.Info("job over: the coordinator ended it; its results are not kept", "state", state, "running", running)
}

// waitOrphans waits until the running tasks of a lost session are over
// (each within its timeout), or the node stops: the job's plugin
// processes and folders stay until then.
func (s *session) waitOrphans() {
	stop := context.AfterFunc(s.n.life, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.active) > 0 && s.n.life.Err() == nil {
		s.idle.Wait()
	}
}

// handOver offers the new session the results kept of the job's earlier
// sessions, before the first Pull: the coordinator takes them before it
// leases their tasks to anyone.
func (s *session) handOver(stream peerpb.Peer_WorkServer, msgs []*peerpb.Handovers) error {
	n := 0
	for _, m := range msgs {
		if err := stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Handovers{Handovers: m}}); err != nil {
			return fmt.Errorf("hand over results: %w", err)
		}
		n += len(m.Handovers)
	}
	if n > 0 {
		s.n.mu.Lock()
		s.n.stats.Offered += n
		s.n.mu.Unlock()
		s.log.Info("results of the job's earlier sessions offered to its coordinator", "results", n)
	}
	return nil
}

// takeOver registers the session as its run's on this node, and first
// ends the run's older sessions still open here: a coordinator opens a
// session of a run with a peer only once it has given up the one before
// (it died, or the stream broke), so they are lost, even if their streams
// have not ended yet. Their running tasks become the keeper's orphans
// before watch takes stock, rather than finish unannounced.
func (s *session) takeOver(ctx context.Context, key string) error {
	for _, old := range s.n.keep.join(key, s) {
		old.log.Info("a new session of the job's run came: this one is lost")
		old.supersede()
		select {
		case <-old.gone:
		case <-old.left:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// handOverOrphans hands over each task of the job's lost sessions that
// ran when the session started (Welcome.running) as it ends, whatever
// its outcome: the coordinator holds the task for this peer until then.
func (s *session) handOverOrphans(ctx context.Context, w *orphanWatch, n int) {
	for range n {
		select {
		case h := <-w.ch:
			s.send(ctx, &peerpb.FromPeer{Msg: &peerpb.FromPeer_Handovers{Handovers: &peerpb.Handovers{Handovers: []*peerpb.Handover{h}}}})
			s.log.Debug("a task of the job's lost session ended; handed over", "task", h.TaskId, "outcome", h.Result.GetOutcome())
		case <-ctx.Done():
			return
		}
	}
}

// exec runs a batch of leases in a slot (called by the scheduler, one
// call at a time per slot), through the same path as the submitter's own
// slots (package taskrun): one plugin call where the plugin serves
// batches, each lease with its own outcome, and sends each result as soon
// as its task ends.
func (s *session) exec(batch []*queued, slot int) {
	if len(batch) > 1 {
		s.log.Debug("running a batch", "leases", len(batch), "slot", slot)
	}
	items := make([]taskrun.Item, len(batch))
	for i, it := range batch {
		l := it.lease
		phasetrace.Mark("p.exec", l.LeaseId)
		a := taskrun.Attempt{
			JobID:   s.hello.JobId,
			TaskID:  l.TaskId,
			Attempt: int(l.Attempt),
			Params:  l.Params,
			Inputs:  s.inputs,
			Timeout: s.timeout,
			Host:    newTunnelHost(s, l.LeaseId),
			Disk:    s.n.taskDisk(),
		}
		if !l.DigestOnly {
			a.InlineMax = inlineOutput // sent inline anyway: skip the disk
		}
		if s.n.cfg.Lie.Rate > 0 {
			a.Tamper = func(stage string) error { return s.n.lie(stage, l) }
		}
		items[i] = taskrun.Item{Ctx: it.ctx, Attempt: a}
	}
	var work string
	next := func(clean bool) (string, error) {
		if work != "" && !clean {
			s.n.clearSlotDir(slot, work, false)
		}
		var err error
		work, err = s.n.slotDir(slot, s.job.work)
		return work, err
	}
	// The session's base (tasks may outlive a broken session, keep.go): a
	// lease revoked stops its own task only.
	clean := taskrun.RunBatch(s.base, s.pool, items, next, func(i int, out taskrun.Output) {
		it := batch[i]
		res := &peerpb.Result{LeaseId: it.lease.LeaseId, StartedUnixNano: out.Start.UnixNano(), EndedUnixNano: out.End.UnixNano()}
		if out.Start.IsZero() {
			now := time.Now().UnixNano()
			res.StartedUnixNano, res.EndedUnixNano = now, now
		}
		err := out.Err
		if err == nil {
			err = s.collect(it.ctx, out, res, it.lease)
			out.Outcome = pluginhost.Classify(it.ctx, err)
		}
		if out.Stage != "" {
			os.RemoveAll(out.Stage)
		}
		res.Outcome = out.Outcome
		if err != nil {
			res.Error = plain.Error(err).Error()
			res.Outputs = nil
		}
		if out.Outcome == report.OutcomeCanceled && out.Start.IsZero() {
			res.Error = "canceled before it started"
		}
		if it.paused.Load() && res.Outcome != report.OutcomeOK { // volunteer.go
			res.Outcome, res.Error = report.OutcomeCanceled, errPausedLease
		}
		if phasetrace.On() && !out.Start.IsZero() {
			phasetrace.At("p.start", res.LeaseId, out.Start)
			phasetrace.At("p.end", res.LeaseId, out.End)
		}
		s.n.malform(res)
		s.n.serveCount(s.served, res.Outcome)
		if s.log.Enabled(it.ctx, slog.LevelDebug) {
			s.log.Debug("task ran", "task", it.lease.TaskId, "attempt", it.lease.Attempt, "outcome", res.Outcome)
		}
		s.finish(it, res)
	})
	if work != "" && !clean {
		s.n.clearSlotDir(slot, work, false)
	}
}

// collect fills res with the output's digest and files: small files
// inline, bigger ones as blocks in the store for the coordinator to fetch.
func (s *session) collect(ctx context.Context, out taskrun.Output, res *peerpb.Result, l *peerpb.Lease) error {
	res.Digest = out.Digest[:]
	if out.Inline {
		if out.Data != nil {
			sum := sha256.Sum256(out.Data)
			res.Outputs = []*peerpb.Output{{Name: sdk.DataFile, Size: int64(len(out.Data)), Digest: sum[:], Data: out.Data}}
		}
		return nil
	}
	for _, name := range out.Files {
		path := filepath.Join(out.Stage, filepath.FromSlash(name))
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		o := &peerpb.Output{Name: name, Size: fi.Size()}
		if fi.Size() <= inlineOutput && !l.DigestOnly {
			if o.Data, err = os.ReadFile(path); err != nil {
				return err
			}
		} else {
			_, id, err := blocks.PutPath(ctx, s.n.store, path, blocks.DefaultBlockSize)
			if err != nil {
				return fmt.Errorf("store output %s: %w", name, s.n.storeFull(err))
			}
			o.FileId = id[:]
			if err := s.n.store.Pin("job-"+s.hello.JobId, id); err != nil {
				return fmt.Errorf("store output %s: %w", name, err)
			}
		}
		res.Outputs = append(res.Outputs, o)
	}
	return nil
}

// tunnelHost is the task's Host on a peer: a transport, not a second
// implementation. It relays the callbacks to the coordinator, whose own
// Host for the lease (the one the submitter's local slots use directly)
// answers them: progress and partial results as messages, the
// shared-state calls (messages between tasks, job-global variables,
// checkpoints) as HostCalls.
type tunnelHost struct {
	peerpb.HostClient // the shared-state calls, through call
	s                 *session
	id                uint64
}

var _ sdk.Host = (*tunnelHost)(nil)

func newTunnelHost(s *session, id uint64) *tunnelHost {
	h := &tunnelHost{s: s, id: id}
	h.Call = h.call
	return h
}

// call tunnels one Host call to the coordinator and waits for its reply.
func (h *tunnelHost) call(ctx context.Context, c *peerpb.HostCall) (*peerpb.HostReply, error) {
	s := h.s
	c.LeaseId = h.id
	ch := make(chan *peerpb.HostReply, 1)
	s.mu.Lock()
	s.nextCall++
	c.CallId = s.nextCall
	s.pending[c.CallId] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, c.CallId)
		s.mu.Unlock()
	}()
	select {
	case s.outbox <- &peerpb.FromPeer{Msg: &peerpb.FromPeer_Call{Call: c}}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.gone:
		return nil, errCoordinatorGone
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.gone:
		return nil, errCoordinatorGone
	}
}

// Checkpoint keeps a copy of the state in this node's block store too,
// then hands it to the coordinator, which keeps the copy a resume uses.
func (h *tunnelHost) Checkpoint(ctx context.Context, state []byte) error {
	if _, _, err := blocks.PutFile(ctx, h.s.n.store, bytes.NewReader(state), 0); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return h.HostClient.Checkpoint(ctx, state)
}

func (h *tunnelHost) Progress(ctx context.Context, fraction float64, note string) error {
	select {
	case h.s.outbox <- &peerpb.FromPeer{Msg: &peerpb.FromPeer_Progress{Progress: &peerpb.Progress{LeaseId: h.id, Fraction: fraction, Note: note}}}:
	default: // progress is advisory: drop it rather than stall the task
	}
	return nil
}

func (h *tunnelHost) Partial(ctx context.Context, data []byte) error {
	h.s.send(ctx, &peerpb.FromPeer{Msg: &peerpb.FromPeer_Partial{Partial: &peerpb.Partial{LeaseId: h.id, Data: data}}})
	return nil
}
