package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/pluginhost"
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
	// nameRe: an input's name, a local slash-separated path (a stage's
	// upstream outputs are needs/<stage>/<task>/<file>).
	nameRe = regexp.MustCompile(`^[^\\\x00]{1,255}$`)
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
		Slots:     uint32(n.allSlots()),
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
	n      *Node
	ctx    context.Context // the session's: ends with its stream
	hello  *peerpb.Hello
	log    *slog.Logger
	job    *jobFiles  // nil until prepare
	served *ServedJob // its job as Node.Served lists it; nil until welcomed
	pool   *pluginhost.Pool
	// gpu: the job's tasks need a GPU and run on the GPU slots, through
	// gpuPools (one per device, offer.go); pool is the first of them.
	gpu      bool
	gpuPools []*pluginhost.Pool
	inputs   []sdk.File
	own      []*ownInput // inputs a task sees when its lease names them (owninputs.go)
	// leaseFiles: the inputs leases carried (Lease.files), by name
	// (owninputs.go).
	leaseFiles leaseFiles
	timeout    time.Duration

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
	phasetrace.Mark("p.hello", 0)
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
	need := hello.Resources.Spec()
	if n.cfg.Slots == 0 && need.GPUs == 0 {
		return refuse("this node takes no work (0 slots)")
	}
	if hello.Network && !n.cfg.AllowNetwork {
		return refuse("the job asks for the network (sandbox.network) and this peer was not started with --allow-network")
	}
	if reason := n.misfit(hello); reason != "" {
		return refuse(reason)
	}
	if reason := n.fence.admit(hello.JobId, hello.Run, hello.Epoch, coordID.String()); reason != "" {
		return refuse(peerpb.RefuseStale + reason)
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
		gpu:     need.GPUs > 0,
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
	phasetrace.Mark("p.prepared", 0)
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
	if err := stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Welcome{Welcome: &peerpb.Welcome{Name: n.cfg.Name, Slots: uint32(n.sched.slotsFor(sess.gpu)), Handovers: uint32(count), Acks: true, Running: running}}}); err != nil {
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
	case int(h.OwnInputs) > len(h.Inputs):
		return fmt.Errorf("%d inputs of tasks' own of %d inputs", h.OwnInputs, len(h.Inputs))
	case h.CoordinatorAddr == "":
		return errors.New("no coordinator address")
	}
	seen := map[string]bool{}
	for _, in := range h.Inputs {
		if in == nil || !nameRe.MatchString(in.Name) || !filepath.IsLocal(in.Name) || in.Name == "." || in.Name == ".." || len(in.FileId) != blocks.IDSize || seen[in.Name] {
			return errors.New("malformed or duplicate input reference")
		}
		seen[in.Name] = true
	}
	return nil
}
