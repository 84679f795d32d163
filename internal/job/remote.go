package job

import (
	"context"
	"errors"
	"fmt"
	"github.com/p2pc/p2pc/internal/outputs"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// ProtocolVersion is the peer protocol version this build speaks.
const ProtocolVersion = 2

// Swarm enrols remote peers into a running job: it calls Session.Enrol
// for every peer that can take the job's tasks, as peers come and go,
// until ctx ends.
type Swarm interface {
	Serve(ctx context.Context, s *Session)
}

// RemoteOptions give a job what it needs to farm tasks out to peers.
type RemoteOptions struct {
	Swarm Swarm
	// Store is the submitter's block store: the plugin and the inputs are
	// put there for peers to fetch, and outputs are fetched into it.
	Store blocks.Store
	// Conns pools gRPC connections to peers.
	Conns *transfer.Pool
	// Addr is the gRPC address peers reach this node at.
	Addr string
}

// Session is a running job as seen by the swarm.
type Session struct {
	r        *runner
	q        *queue
	workRoot string

	once    sync.Once
	hello   *peerpb.Hello
	helloEr error
}

// Peer is a remote peer to enrol. Enrol names it Name@ID, with the node
// ID the connection's handshake proved.
type Peer struct {
	Name string
	Addr string
}

// JobID is the job's ID.
func (s *Session) JobID() string { return s.r.p.ID }

// PluginPlatform is the GOOS/GOARCH the job's plugin runs on: peers of
// another platform are not offered the job.
func (s *Session) PluginPlatform() (goos, goarch string) { return runtime.GOOS, runtime.GOARCH }

// publish puts the plugin and the inputs into the block store, once.
func (s *Session) publish(ctx context.Context) (*peerpb.Hello, error) {
	s.once.Do(func() {
		s.hello, s.helloEr = s.buildHello(ctx)
	})
	return s.hello, s.helloEr
}

func (s *Session) buildHello(ctx context.Context) (*peerpb.Hello, error) {
	r := s.r
	ro := r.opts.Remote
	put := func(name, path string, digest [32]byte) (*peerpb.FileRef, error) {
		m, id, err := blocks.PutPath(ctx, ro.Store, path, blocks.DefaultBlockSize)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", name, err)
		}
		return &peerpb.FileRef{Name: name, FileId: id[:], Size: m.Size, Digest: digest[:]}, nil
	}
	h := &peerpb.Hello{
		Proto:           ProtocolVersion,
		JobId:           r.p.ID,
		JobName:         r.p.Spec.Name,
		Coordinator:     r.opts.Node,
		CoordinatorAddr: ro.Addr,
		TimeoutMs:       r.p.Spec.Timeout.Milliseconds(),
	}
	h.PluginOs, h.PluginArch = s.PluginPlatform()
	var err error
	if h.Plugin, err = put("plugin", r.p.Plugin.Path, r.p.Plugin.Digest); err != nil {
		return nil, err
	}
	for _, in := range r.p.Inputs {
		ref, err := put(in.Name, in.Path, in.Digest)
		if err != nil {
			return nil, err
		}
		h.Inputs = append(h.Inputs, ref)
	}
	return h, nil
}

// ErrRefused: the peer will not take part in the job (protocol version,
// platform, or its own reasons). Do not enrol it again for this job.
var ErrRefused = errors.New("peer refused the job")

// Enrol runs the job's work session with one peer until the job ends,
// the peer leaves, the connection breaks, or ctx ends (cancel it when
// the membership declares the peer dead). Every lease the peer held is
// requeued at once when Enrol returns, without counting against the
// tasks' retries.
func (s *Session) Enrol(ctx context.Context, peer Peer, client peerpb.PeerClient) error {
	hello, err := s.publish(ctx)
	if err != nil {
		return err
	}
	log := s.r.log.With("peer", peer.Name, "addr", peer.Addr)
	// The stream lives in ctx: whoever ends the session (the worker's own
	// goroutines with a cause, the swarm, the job) ends the stream too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	stream, err := client.Work(ctx)
	if err != nil {
		return fmt.Errorf("enrol %s: %w", peer.Name, err)
	}
	// The peer is named by the node ID its TLS handshake proved, beside
	// the name it gave: leases, results and votes are bound to that, so
	// no member can pass its results off as another's.
	id, err := trust.PeerIDFromContext(stream.Context())
	if err != nil {
		return fmt.Errorf("enrol %s: %w", peer.Name, err)
	}
	peer.Name = peer.Name + "@" + id.String()
	log = log.With("peer", peer.Name)
	if err := stream.Send(&peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: hello}}); err != nil {
		return fmt.Errorf("enrol %s: %w", peer.Name, err)
	}
	first, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("enrol %s: %w", peer.Name, err)
	}
	switch m := first.Msg.(type) {
	case *peerpb.FromPeer_Refuse:
		log.Warn("peer refused the job", "reason", m.Refuse.Reason)
		return fmt.Errorf("enrol %s: %w: %s", peer.Name, ErrRefused, m.Refuse.Reason)
	case *peerpb.FromPeer_Welcome:
		log.Info("peer enrolled", "slots", m.Welcome.Slots)
		s.q.enrol(peer.Name)
	default:
		return fmt.Errorf("enrol %s: unexpected first message %T", peer.Name, first.Msg)
	}

	w := &remoteWorker{s: s, peer: peer, stream: stream, leases: map[uint64]*lease{},
		outbox: make(chan *peerpb.ToPeer, 64), credits: make(chan int, 64)}
	err = w.run(ctx, cancel)
	lost := s.q.lose(peer.Name, fmt.Errorf("peer %s went away: %w", peer.Name, errOr(err, io.EOF)))
	if lost > 0 {
		log.Warn("peer lost with leases; tasks requeued", "leases", lost, "err", err)
	}
	if errors.Is(err, errDrained) || ctx.Err() != nil {
		return nil
	}
	return err
}

func errOr(err, def error) error {
	if err == nil {
		return def
	}
	return err
}

type remoteWorker struct {
	s      *Session
	peer   Peer
	stream peerpb.Peer_WorkClient

	mu     sync.Mutex
	leases map[uint64]*lease // by lease id

	outbox  chan *peerpb.ToPeer
	credits chan int
	calls   atomic.Int64
}

// maxCallsInFlight bounds a peer's concurrent host calls (Recv waits).
const maxCallsInFlight = 4096

// hostCall executes a task's tunnelled Host call against the job's shared
// state.
func (w *remoteWorker) hostCall(ctx context.Context, c *peerpb.HostCall) *peerpb.HostReply {
	reply := &peerpb.HostReply{CallId: c.CallId}
	l := w.get(c.LeaseId)
	if l == nil {
		reply.Error = "no such lease on this peer"
		return reply
	}
	h := &leaseHost{r: w.s.r, l: l}
	var err error
	switch c.Op {
	case "send":
		err = h.Send(ctx, c.To, c.Data)
	case "recv":
		var m sdk.Message
		if m, err = h.Recv(ctx); err == nil {
			reply.From, reply.Value, reply.Seq = m.From, m.Data, m.Seq
		}
	case "load", "store", "cas":
		var g sdk.Global
		switch c.Op {
		case "load":
			g, err = h.Load(ctx, c.Key)
		case "store":
			g, err = h.Store(ctx, c.Key, c.Data)
		default:
			reply.Ok, g, err = h.CompareAndSwap(ctx, c.Key, c.Version, c.Data)
		}
		reply.Version, reply.Value = g.Version, g.Value
	case "checkpoint":
		err = h.Checkpoint(ctx, c.Data)
	case "resume":
		reply.Value, reply.Ok, err = h.Resume(ctx)
	default:
		reply.Unsupported = true
		err = fmt.Errorf("unknown host call %q", c.Op)
	}
	if err != nil {
		reply.Error = err.Error()
	}
	return reply
}

func (w *remoteWorker) run(ctx context.Context, cancel context.CancelCauseFunc) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)

	wg.Add(2)
	go func() { // the only goroutine that sends on the stream
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-w.outbox:
				if err := w.stream.Send(m); err != nil {
					cancel(fmt.Errorf("send to %s: %w", w.peer.Name, err))
					return
				}
			}
		}
	}()
	go func() { // turns the peer's credits into leases
		defer wg.Done()
		if err := w.lease(ctx); err != nil {
			cancel(err)
		}
	}()

	results := make(chan *peerpb.Result, 64)
	wg.Add(1)
	go func() { // stages results off the receive loop
		defer wg.Done()
		var rwg sync.WaitGroup
		defer rwg.Wait()
		sem := make(chan struct{}, 8)
		for {
			select {
			case <-ctx.Done():
				return
			case res := <-results:
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				rwg.Add(1)
				go func() {
					defer rwg.Done()
					defer func() { <-sem }()
					w.settle(ctx, res)
				}()
			}
		}
	}()

	for {
		msg, err := w.stream.Recv()
		if err != nil {
			if c := context.Cause(ctx); c != nil {
				return c
			}
			return fmt.Errorf("receive from %s: %w", w.peer.Name, err)
		}
		switch m := msg.Msg.(type) {
		case *peerpb.FromPeer_Pull:
			select {
			case w.credits <- int(min(m.Pull.N, 1<<16)):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		case *peerpb.FromPeer_Result:
			select {
			case results <- m.Result:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		case *peerpb.FromPeer_Results:
			if len(m.Results.Results) > MaxBatch {
				return fmt.Errorf("peer %s sent %d results in one message, at most %d", w.peer.Name, len(m.Results.Results), MaxBatch)
			}
			for _, res := range m.Results.Results {
				select {
				case results <- res:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
		case *peerpb.FromPeer_Progress:
			if l := w.get(m.Progress.LeaseId); l != nil {
				w.s.r.opts.Events.TaskProgress(l.taskID, m.Progress.Fraction, m.Progress.Note)
			}
		case *peerpb.FromPeer_Partial:
			if l := w.get(m.Partial.LeaseId); l != nil {
				(&leaseHost{r: w.s.r, l: l}).Partial(ctx, m.Partial.Data)
			}
		case *peerpb.FromPeer_Call:
			if n := w.calls.Add(1); n > maxCallsInFlight {
				w.calls.Add(-1)
				return fmt.Errorf("peer %s has more than %d host calls in flight", w.peer.Name, maxCallsInFlight)
			}
			wg.Add(1)
			go func(c *peerpb.HostCall) {
				defer wg.Done()
				defer w.calls.Add(-1)
				reply := w.hostCall(ctx, c)
				select {
				case w.outbox <- &peerpb.ToPeer{Msg: &peerpb.ToPeer_Reply{Reply: reply}}:
				case <-ctx.Done():
				}
			}(m.Call)
		}
	}
}

func (w *remoteWorker) get(id uint64) *lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leases[id]
}

// MaxBatch bounds the leases (or results) in one Leases (Results)
// message, and MaxBatchBytes their size, the coordinator's and the peers'
// alike: a batch saves per-message costs on both sides when many slots free
// up at once, and stays a small message.
const (
	MaxBatch      = 256
	MaxBatchBytes = 1 << 20
)

// lease waits for credits and sends one lease per credit: as many as are
// ready at once go out in one message.
func (w *remoteWorker) lease(ctx context.Context) error {
	credit := 0
	for {
		if credit == 0 {
			select {
			case <-ctx.Done():
				return nil
			case n := <-w.credits:
				credit += n
				continue
			}
		}
		l, err := w.s.q.next(ctx, w.peer.Name)
		if err != nil {
			if errors.Is(err, errDrained) || errors.Is(err, errExcluded) {
				return err
			}
			return nil
		}
		batch := []*lease{l}
		msgs := []*peerpb.Lease{w.leaseMsg(l)}
		size := len(msgs[0].Params)
		for credit--; credit > 0 && len(batch) < MaxBatch && size < MaxBatchBytes; credit-- {
			l := w.s.q.tryNext(w.peer.Name)
			if l == nil {
				break
			}
			batch = append(batch, l)
			msgs = append(msgs, w.leaseMsg(l))
			size += len(msgs[len(msgs)-1].Params)
		}
		w.mu.Lock()
		for _, l := range batch {
			w.leases[l.id] = l
		}
		w.mu.Unlock()
		msg := &peerpb.ToPeer{Msg: &peerpb.ToPeer_Lease{Lease: msgs[0]}}
		if len(msgs) > 1 {
			msg = &peerpb.ToPeer{Msg: &peerpb.ToPeer_Leases{Leases: &peerpb.Leases{Leases: msgs}}}
		}
		select {
		case w.outbox <- msg:
		case <-ctx.Done():
			return nil
		}
		for _, l := range batch {
			go w.watchRevoke(ctx, l)
		}
	}
}

func (w *remoteWorker) leaseMsg(l *lease) *peerpb.Lease {
	return &peerpb.Lease{
		LeaseId: l.id, TaskId: l.taskID, Attempt: uint32(l.attempt), Params: w.s.r.p.Spec.TaskParamsJSON(l.task),
		DigestOnly: l.digestOnly,
	}
}

// watchRevoke tells the peer to stop a lease that was taken back.
func (w *remoteWorker) watchRevoke(ctx context.Context, l *lease) {
	select {
	case <-ctx.Done():
	case <-l.revoked:
		if w.get(l.id) == nil {
			return
		}
		select {
		case w.outbox <- &peerpb.ToPeer{Msg: &peerpb.ToPeer_Cancel{Cancel: &peerpb.Cancel{LeaseId: l.id}}}:
		case <-ctx.Done():
		}
	}
}

// settle turns a peer's result into a lease result: outputs are fetched
// (inline or as blocks), staged and checked against the peer's digest.
func (w *remoteWorker) settle(ctx context.Context, res *peerpb.Result) {
	w.mu.Lock()
	l := w.leases[res.LeaseId]
	delete(w.leases, res.LeaseId)
	w.mu.Unlock()
	if l == nil {
		return // unknown or already settled lease: ignore
	}
	out := result{outcome: res.Outcome, end: time.Unix(0, res.EndedUnixNano).UTC()}
	if res.EndedUnixNano == 0 {
		out.end = time.Now().UTC()
	}
	if res.Error != "" {
		out.err = errors.New(res.Error)
	}
	switch res.Outcome {
	case report.OutcomeOK, report.OutcomeTaskError, report.OutcomeCrashed, report.OutcomeTimeout, report.OutcomeCanceled, report.OutcomeLost:
	default:
		out.outcome, out.err = report.OutcomeLost, fmt.Errorf("peer %s sent an unknown outcome %q", w.peer.Name, res.Outcome)
	}
	if out.outcome == report.OutcomeOK && l.digestOnly {
		out.digest = fmt.Sprintf("%x", res.Digest)
		out.fetch = func(ctx context.Context, dir string) error {
			_, _, err := w.stage(ctx, dir, res)
			return err
		}
	} else if out.outcome == report.OutcomeOK {
		stage := filepath.Join(w.s.workRoot, l.taskID+"."+strconv.FormatUint(l.id, 10)+".out")
		digest, files, err := w.stage(ctx, stage, res)
		if err == nil && w.s.r.verifier {
			if err = w.s.r.verifyOutput(ctx, l, stage, files); errors.Is(err, errRejected) {
				os.RemoveAll(stage)
				out.outcome, out.err = report.OutcomeRejected, err
				w.s.q.finish(l, out)
				return
			}
		}
		if err != nil {
			os.RemoveAll(stage)
			out.outcome, out.err = report.OutcomeLost, fmt.Errorf("collect output from %s: %w", w.peer.Name, err)
			if ctx.Err() != nil {
				out.outcome = report.OutcomeCanceled
			}
		} else {
			out.stage, out.digest, out.files = stage, digest, files
		}
	}
	w.s.q.finish(l, out)
}

// maxInline bounds an inline output file; larger ones must travel as blocks.
const maxInline = 4 << 20

func (w *remoteWorker) stage(ctx context.Context, stage string, res *peerpb.Result) (string, []string, error) {
	if inlineOnly(res.Outputs) {
		return stageInline(stage, res)
	}
	ro := w.s.r.opts.Remote
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", nil, err
	}
	root, err := os.OpenRoot(stage)
	if err != nil {
		return "", nil, err
	}
	defer root.Close()
	for _, o := range res.Outputs {
		name := filepath.Clean(filepath.FromSlash(o.Name))
		if !filepath.IsLocal(name) {
			return "", nil, fmt.Errorf("output name %q is not a local path", o.Name)
		}
		if dir := filepath.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return "", nil, err
			}
		}
		switch {
		case len(o.FileId) == 0:
			if err := checkInline(o); err != nil {
				return "", nil, err
			}
			if err := root.WriteFile(name, o.Data, 0o644); err != nil {
				return "", nil, err
			}
		default:
			id, err := blocks.IDFromBytes(o.FileId)
			if err != nil {
				return "", nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
			f := transfer.NewFetcher(ro.Store, ro.Conns, transfer.FetchOptions{Logger: w.s.r.log})
			if _, err := f.Fetch(ctx, id, []string{w.peer.Addr}, nil); err != nil {
				return "", nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
			if err := blocks.ExportFile(ctx, ro.Store, id, filepath.Join(stage, name)); err != nil {
				return "", nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
		}
	}
	digest, files, err := outputs.Digest(stage)
	if err != nil {
		return "", nil, err
	}
	if got := fmt.Sprintf("%x", res.Digest); got != digest {
		return "", nil, fmt.Errorf("output digest mismatch: peer said %.12s, files hash to %.12s", got, digest)
	}
	return digest, files, nil
}

// stageInline stages an output that is only inline data (or nothing): the
// most common result of small tasks, so it takes the fewest file system
// calls (mkdir, create, write, close) and is digested from memory.
func stageInline(stage string, res *peerpb.Result) (string, []string, error) {
	var data []byte
	var files []string
	if len(res.Outputs) == 1 {
		o := res.Outputs[0]
		if err := checkInline(o); err != nil {
			return "", nil, err
		}
		data, files = o.Data, []string{sdk.DataFile}
	}
	digest := outputs.DigestInline(data)
	if got := fmt.Sprintf("%x", res.Digest); got != digest {
		return "", nil, fmt.Errorf("output digest mismatch: peer said %.12s, data hashes to %.12s", got, digest)
	}
	if err := os.Mkdir(stage, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", nil, err
	}
	if files != nil {
		if err := os.WriteFile(filepath.Join(stage, sdk.DataFile), data, 0o644); err != nil {
			return "", nil, err
		}
	}
	return digest, files, nil
}

// checkInline checks an inline output's size against its claim and the
// inline bound.
func checkInline(o *peerpb.Output) error {
	if len(o.Data) > maxInline || int64(len(o.Data)) != o.Size {
		return fmt.Errorf("output %q: inline size %d does not match %d", o.Name, len(o.Data), o.Size)
	}
	return nil
}

// inlineOnly: the output is nothing, or just the inline data file.
func inlineOnly(outs []*peerpb.Output) bool {
	return len(outs) == 0 || (len(outs) == 1 && outs[0].Name == sdk.DataFile && len(outs[0].FileId) == 0)
}
