package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"
	"github.com/p2pc/p2pc/plugins/sdk"

	"google.golang.org/protobuf/proto"
)

// Swarm enrols remote peers into a running job: for every peer that can
// take the job's tasks (of platform goos/goarch; "" for any), as peers come and
// go, it calls enrol, which runs the peer's work session; it cancels the
// session's ctx when the peer leaves, and does not enrol again a peer
// whose session ended with peerpb.ErrRefused. Serve returns when ctx
// ends. The coordinator owns this interface; package node implements it
// without importing this package.
type Swarm interface {
	Serve(ctx context.Context, jobID, goos, goarch string, enrol EnrolFunc)
}

// EnrolFunc runs the job's work session with the peer name at addr over
// client (Session.Enrol); id is the node ID the peer gossips ("" for
// none), which its handshake must prove.
type EnrolFunc = func(ctx context.Context, name, id, addr string, client peerpb.PeerClient) error

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
	q        *sched.Queue
	workRoot string
	// runDone is closed when the run's work ends (its tasks are over, or
	// it was interrupted): sessions ending then are no peer's fault.
	runDone <-chan struct{}
	started time.Time

	// handedOver counts the results peers handed over from earlier
	// sessions of the job that the queue took.
	handedOver atomic.Int64

	// over is closed when the job is over and its database holds it all
	// (jobOver, ack.go): each session sends End, then closes. endState
	// is the job's state then; telling counts the sessions yet to send it.
	over     chan struct{}
	endState string
	telling  counter

	// gate holds leases back while the last run's peers hand over; peers
	// lists the sessions for the next rerun (handover.go).
	gate  *handoverGate
	peers *sessionList

	// ids: the node IDs peers proved, one worker each.
	ids identities

	// plats: the hellos of the other platforms (platforms.go).
	plats platformHellos
}

// counter counts what is under way and lets one wait until none is.
type counter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
}

// Wait waits until the count is 0, or ctx ends.
func (c *counter) wait(ctx context.Context) {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	z := c.zero
	c.mu.Unlock()
	select {
	case <-z:
	case <-ctx.Done():
	}
}

// Peer is a remote peer to enrol. Enrol names it Name@ID, with the node
// ID the connection's handshake proved.
type Peer struct {
	Name string
	Addr string
}

// pluginPlatform is the GOOS/GOARCH of the published hello's plugin (this
// machine's); peers of other platforms get theirs (platforms.go).
func pluginPlatform() (goos, goarch string) { return runtime.GOOS, runtime.GOARCH }

// publish returns the job's hello (runner.publish).
func (s *Session) publish(ctx context.Context) (*peerpb.Hello, error) {
	return s.r.publish(ctx)
}

// ending reports whether the run's work is ending.
func (s *Session) ending() bool {
	select {
	case <-s.runDone:
		return true
	default:
		return false
	}
}

// ErrRefused is peerpb.ErrRefused: the peer will not take part in the
// job. Do not enrol it again for this job.
var ErrRefused = peerpb.ErrRefused

// Enrol runs the job's work session with one peer until the job ends,
// the peer leaves, the connection breaks, or ctx ends (cancel it when
// the membership declares the peer dead). Every lease the peer held is
// requeued at once when Enrol returns, without counting against the
// tasks' retries.
//
// The peer is known by the node ID its handshake proves: a peer that
// gossips another ID (claimed) is refused, and a second name proving an
// ID whose session is open is refused until that session ends; each ID is
// one worker (identities), under the name it first enrolled with.
func (s *Session) Enrol(ctx context.Context, name, claimed, addr string, client peerpb.PeerClient) error {
	peer := Peer{Name: name, Addr: addr}
	published, err := s.helloFor(ctx, name, client)
	if err != nil {
		return err
	}
	// The hello is published from the run's start, before the report
	// (and so the run ID) exists; each session sends its own copy.
	hello := proto.Clone(published).(*peerpb.Hello)
	hello.Run = s.r.rep.Run
	log := s.r.log.With("peer", peer.Name, "addr", peer.Addr)
	// The stream lives in ctx: whoever ends the session (the worker's own
	// goroutines with a cause, the swarm, the job) ends the stream too.
	outer := ctx // ended by the job or the swarm, not by the session
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	failed := func(err error) error {
		err = plain.Error(err)
		if ctx.Err() == nil {
			s.q.SessionFailed(peer.Name, err)
		}
		return fmt.Errorf("enrol %s: %w", peer.Name, err)
	}
	release := func() {}
	expected := s.gate.expects(name)
	if s.r.p.Previous != nil && time.Since(s.started) < handoverWindow && !expected {
		// A resumed run that has just started, and a peer the gate does
		// not wait for: it may hand over results it finished while the
		// job's coordinator was gone. No task is leased to anyone until
		// it has (or could not within handoverHold).
		release = s.q.Hold()
		defer release()
		defer time.AfterFunc(handoverHold, release).Stop()
	}
	// Until its handshake names the peer, the gate knows it by name.
	named := false
	defer func() {
		if named {
			s.gate.done(peer.Name)
		} else {
			s.gate.failed(name)
		}
	}()
	stream, err := client.Work(ctx)
	if err != nil {
		return failed(err)
	}
	// The peer is named by the node ID its TLS handshake proved, beside
	// the name it gave: leases, results and votes are bound to that, so
	// no member can pass its results off as another's.
	id, err := trust.PeerIDFromContext(stream.Context())
	if err != nil {
		return failed(err)
	}
	proved := id.String()
	if claimed != "" && claimed != proved {
		refusal := forgedID(name, claimed, proved)
		if s.ids.first(name + "@" + claimed) {
			log.Warn("peer not enrolled: its gossiped node ID is not the one its handshake proved (logged once)", "reason", refusal.Reason)
		}
		return fmt.Errorf("enrol %s: %w", name, refusal)
	}
	worker, ok := s.ids.claim(name, proved)
	if !ok {
		refusal := busyID(name, proved, worker)
		if s.ids.first(name + "@" + proved) {
			log.Warn("peer not enrolled while its node ID has a session under another name (logged once)", "reason", refusal.Reason)
		}
		return fmt.Errorf("enrol %s: %w", name, refusal)
	}
	defer s.ids.release(proved)
	peer.Name = worker
	named = true
	// It answered: the gate waits for its hand-over, however long its
	// Welcome takes, until its session ends (at most handoverMax).
	s.gate.enrolled(peer.Name)
	log = log.With("peer", peer.Name)
	if err := stream.Send(&peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: hello}}); err != nil {
		return failed(err)
	}
	first, err := stream.Recv()
	if err != nil {
		return failed(err)
	}
	switch m := first.Msg.(type) {
	case *peerpb.FromPeer_Refuse:
		if peerpb.RefusalPasses(m.Refuse.Reason) {
			log.Warn("peer refused the job for now (the cause may pass); it will be asked again", "reason", m.Refuse.Reason)
		} else {
			log.Warn("peer refused the job", "reason", m.Refuse.Reason)
		}
		s.q.Refused(peer.Name, m.Refuse.Reason)
		return fmt.Errorf("enrol %s: %w", peer.Name, &peerpb.RefusedError{Reason: m.Refuse.Reason})
	case *peerpb.FromPeer_Welcome:
		log.Info("peer enrolled", "slots", m.Welcome.Slots, "handovers", m.Welcome.Handovers)
		s.peers.change(s.r, true, peer.Name)
		if s.gate != nil {
			gate, held, name := s.gate, release, peer.Name
			release = func() { held(); gate.done(name) }
		}
		s.q.Enrol(peer.Name, hostOf(peer.Addr))
		s.q.SetSlots(peer.Name, int(m.Welcome.Slots))
		s.r.opts.Live.sessionUp(peer.Name, int(m.Welcome.Slots))
	default:
		return failed(fmt.Errorf("unexpected first message %T", first.Msg))
	}

	w := &remoteWorker{s: s, peer: peer, stream: stream, leases: map[uint64]*sched.Lease{},
		outbox: make(chan *peerpb.ToPeer, 64), creditKick: make(chan struct{}, 1),
		handovers: int(first.GetWelcome().GetHandovers()), release: release,
		acks: acker{on: first.GetWelcome().GetAcks()}, endSent: make(chan struct{})}
	w.hold(first.GetWelcome().GetRunning()) // before any lease is released
	if w.acks.on {
		s.telling.add(1)
		defer w.ended()
	}
	if w.handovers == 0 {
		release()
	}
	err = w.run(ctx, cancel)
	s.q.SetSlots(peer.Name, 0)
	s.r.opts.Live.sessionDown(peer.Name, plain.Error(err), outer.Err() != nil)
	if s.ending() {
		// The run ends (done, or interrupted): not the peer's fault.
		if n := s.q.Cancel(peer.Name, errors.New("the run ended")); n > 0 {
			log.Debug("run ending; the peer's leases are canceled", "leases", n, "err", err)
		}
		return nil
	}
	lost := s.q.Lose(peer.Name, fmt.Errorf("peer %s went away: %w", peer.Name, plain.Error(errOr(err, io.EOF))))
	if lost > 0 {
		log.Warn("peer lost with leases; tasks requeued", "leases", lost, "err", plain.Error(err))
		log.Debug("peer lost", "err", err)
	}
	// ctx itself has ended by now (run cancels it): only outer says
	// whether the job or the swarm ended the session, not the peer.
	if errors.Is(err, errDrained) || outer.Err() != nil {
		return nil
	}
	err = plain.Error(err)
	if !errors.Is(err, errExcluded) {
		s.q.SessionFailed(peer.Name, err)
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

	mu     sync.Mutex              // a leaf; taken under sched.Queue's lock too (OnRevoke)
	leases map[uint64]*sched.Lease // by lease id

	outbox chan *peerpb.ToPeer
	// credit is what the peer asked for and the leaser has not taken yet;
	// creditKick wakes the leaser. The receive loop only adds and kicks:
	// it never waits on the leaser, which may wait long in Next (the
	// queue has nothing to lease until results come in, and the results
	// come in through the receive loop).
	credit     atomic.Int64
	creditKick chan struct{}
	calls      atomic.Int64

	// handovers the peer announced in Welcome are still to come (the
	// receive loop's own count); release ends the session's hold on the
	// job's leases once they came.
	handovers int
	release   func()
	// held: the tasks of the job's lost sessions still running on the
	// peer (Welcome.running), by task ID: each holds a lease of the
	// peer's, settled by the hand-over that comes when it ends (guarded
	// by mu).
	held map[string]*sched.Lease

	// acks gathers the peer's settled results until they are durable
	// (ack.go); endSent is closed once the peer took End in and closed
	// the stream (or never will).
	acks    acker
	endSent chan struct{}
	// forgedSeen: the peer sent a result for a lease it did not hold (it
	// is logged once).
	forgedSeen atomic.Bool
	endOnce    sync.Once
	sentEnd    atomic.Bool
}

// ended notes that the session sent End, or never will.
func (w *remoteWorker) ended() {
	w.endOnce.Do(func() {
		close(w.endSent)
		w.s.telling.add(-1)
	})
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
	return peerpb.ServeHost(ctx, &leaseHost{r: w.s.r, l: l}, c)
}

// run serves the peer's session until it ends: one goroutine sends on the
// stream, one turns credits into leases, a pool settles results, and the
// receive loop hands each message to its handler.
func (w *remoteWorker) run(ctx context.Context, cancel context.CancelCauseFunc) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)

	results := make(chan *peerpb.Result, 64)
	wg.Add(4)
	go func() {
		defer wg.Done()
		w.ackLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		w.sendLoop(ctx, cancel)
	}()
	go func() { // turns the peer's credits into leases
		defer wg.Done()
		if err := w.lease(ctx); err != nil {
			cancel(err)
		}
	}()
	go func() {
		defer wg.Done()
		w.settleLoop(ctx, results)
	}()

	for {
		msg, err := w.stream.Recv()
		if err != nil {
			if w.sentEnd.Load() {
				w.ended()
				return errDrained // the peer closed after End, as it should
			}
			if c := context.Cause(ctx); c != nil {
				return c
			}
			return fmt.Errorf("receive from %s: %w", w.peer.Name, err)
		}
		if err := w.handle(ctx, msg, results, &wg); err != nil {
			return err
		}
	}
}

// sendLoop is the only goroutine that sends on the stream. When the job
// is over it sends End, and nothing after it.
func (w *remoteWorker) sendLoop(ctx context.Context, cancel context.CancelCauseFunc) {
	var over <-chan struct{}
	if w.acks.on {
		over = w.s.over
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-over:
			// The peer closes the stream once it has taken End in (the
			// receive loop sees that, and may before Send returns); a
			// failed send ends the wait at once.
			w.sentEnd.Store(true)
			if err := w.stream.Send(&peerpb.ToPeer{Msg: &peerpb.ToPeer_End{End: &peerpb.End{State: w.s.endState}}}); err != nil {
				w.ended()
			}
			return
		case m := <-w.outbox:
			if err := w.stream.Send(m); err != nil {
				cancel(fmt.Errorf("send to %s: %w", w.peer.Name, err))
				return
			}
			if phasetrace.On() {
				for _, l := range m.GetLeases().GetLeases() {
					phasetrace.Mark("c.sent", l.LeaseId)
				}
				if l := m.GetLease(); l != nil {
					phasetrace.Mark("c.sent", l.LeaseId)
				}
			}
		}
	}
}

// settleLoop settles results off the receive loop, 8 at a time.
func (w *remoteWorker) settleLoop(ctx context.Context, results <-chan *peerpb.Result) {
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
				w.settled(w.settle(ctx, res), res)
			}()
		}
	}
}

// settled queues the acknowledgement of a result settled (l: its lease,
// nil if unknown): the peer keeps only successful results, so only those
// are acknowledged.
func (w *remoteWorker) settled(l *sched.Lease, res *peerpb.Result) {
	switch {
	case res.Outcome != report.OutcomeOK:
	case l != nil && l.HandedOver:
		w.ackLater(0, l.TaskID)
	default:
		w.ackLater(res.LeaseId, "")
	}
}

// handle acts on one message from the peer: credits go to the leaser,
// results to the settlers, progress and partial results to the job's
// events, host calls to goroutines of their own (on wg). An error ends
// the session.
func (w *remoteWorker) handle(ctx context.Context, msg *peerpb.FromPeer, results chan<- *peerpb.Result, wg *sync.WaitGroup) error {
	switch m := msg.Msg.(type) {
	case *peerpb.FromPeer_Pull:
		w.addCredit(int64(m.Pull.N))
	case *peerpb.FromPeer_Result:
		phasetrace.Mark("c.recv", m.Result.LeaseId)
		select {
		case results <- m.Result:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	case *peerpb.FromPeer_Results:
		if len(m.Results.Results) > peerpb.MaxBatch {
			return fmt.Errorf("peer %s sent %d results in one message, at most %d", w.peer.Name, len(m.Results.Results), peerpb.MaxBatch)
		}
		for _, res := range m.Results.Results {
			phasetrace.Mark("c.recv", res.LeaseId)
			select {
			case results <- res:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	case *peerpb.FromPeer_Handovers:
		if len(m.Handovers.Handovers) > peerpb.MaxBatch {
			return fmt.Errorf("peer %s handed over %d results in one message, at most %d", w.peer.Name, len(m.Handovers.Handovers), peerpb.MaxBatch)
		}
		// Adopted here, settled behind: the hand-over (and the hold on
		// every lease) ends as soon as the queue has taken them all.
		var adopted []*peerpb.Result
		announced := 0 // in Welcome.handovers; the rest end held tasks
		for _, h := range m.Handovers.Handovers {
			if res, ok := w.unhold(h); ok {
				adopted = append(adopted, res)
				continue
			}
			announced++
			res := w.adopt(h)
			if res == nil {
				w.ackLater(0, h.TaskId) // not needed: the peer may forget it
				continue
			}
			adopted = append(adopted, res)
		}
		if len(adopted) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, res := range adopted {
					select {
					case results <- res:
					case <-ctx.Done():
						return // the session's end requeues their leases
					}
				}
			}()
		}
		if w.handovers -= announced; w.handovers <= 0 && announced > 0 {
			w.release() // every task it finished is taken: lease the rest
		}
	case *peerpb.FromPeer_Progress:
		if l := w.get(m.Progress.LeaseId); l != nil {
			w.s.r.opts.Events.TaskProgress(l.TaskID, m.Progress.Fraction, m.Progress.Note)
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
	return nil
}

// adopt takes a result the peer finished in an earlier session of the
// job (a hand-over): if the queue wants it, it gets a lease of its own
// and returns as a result of that lease, settled like a live one (staged,
// checked against its digest, voted on; a malformed one is the peer's
// strike). nil: dropped (the task is decided, or needs no more replicas).
func (w *remoteWorker) adopt(h *peerpb.Handover) *peerpb.Result {
	res := h.GetResult()
	if res == nil || res.Outcome != report.OutcomeOK {
		return nil // only finished work is handed over
	}
	var start time.Time
	if res.StartedUnixNano > 0 {
		start = time.Unix(0, res.StartedUnixNano)
	}
	l := w.s.q.Adopt(w.peer.Name, h.TaskId, start)
	if l == nil {
		return nil
	}
	w.s.r.log.Debug("result handed over", "task", l.TaskID, "peer", w.peer.Name, "attempt", l.Attempt)
	w.mu.Lock()
	w.leases[l.ID] = l
	w.mu.Unlock()
	w.s.handedOver.Add(1)
	res.LeaseId = l.ID
	return res
}

// hold gives the peer a lease of each task its lost sessions still run
// (Welcome.running) that the queue wants (Queue.AdoptRunning): the task
// is running on the peer, and nobody else is leased it, not even a backup
// copy, until its hand-over settles the lease, or the session ends and
// requeues it.
func (w *remoteWorker) hold(running []*peerpb.Orphan) {
	if len(running) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = map[string]*sched.Lease{}
	for _, o := range running {
		var start time.Time
		if o.StartedUnixNano > 0 {
			start = time.Unix(0, o.StartedUnixNano)
		}
		if _, dup := w.held[o.TaskId]; dup {
			continue
		}
		if l := w.s.q.AdoptRunning(w.peer.Name, o.TaskId, start); l != nil {
			w.leases[l.ID] = l
			w.held[o.TaskId] = l
		}
	}
	w.s.r.log.Info("the peer still runs tasks of the job's lost sessions; they are its until it hands them over", "peer", w.peer.Name, "running", len(running), "held", len(w.held))
}

// unhold takes the hand-over of a task held for the peer (hold): ok
// reports whether the task was held, and res is then the result to settle
// its lease with. A task that ended without a result on the peer goes
// back to the queue, uncharged (canceled): the attempt was a lost
// session's.
func (w *remoteWorker) unhold(h *peerpb.Handover) (res *peerpb.Result, ok bool) {
	w.mu.Lock()
	l, ok := w.held[h.TaskId]
	delete(w.held, h.TaskId)
	w.mu.Unlock()
	if !ok {
		return nil, false
	}
	res = h.GetResult()
	if res == nil {
		res = &peerpb.Result{Outcome: report.OutcomeLost}
	}
	if res.Outcome != report.OutcomeOK {
		why := fmt.Sprintf("the attempt of the job's lost session ended without a result (%s", res.Outcome)
		if res.Error != "" {
			why += ": " + res.Error
		}
		res = &peerpb.Result{Outcome: report.OutcomeCanceled, Error: why + ")", StartedUnixNano: res.StartedUnixNano, EndedUnixNano: res.EndedUnixNano}
	} else {
		w.s.r.log.Debug("result handed over", "task", l.TaskID, "peer", w.peer.Name, "attempt", l.Attempt, "held", true)
		w.s.handedOver.Add(1)
	}
	res.LeaseId = l.ID
	return res, true
}

// takenOver is how many handed-over results the job took (nil: none).
func (s *Session) takenOver() int64 {
	if s == nil {
		return 0
	}
	return s.handedOver.Load()
}

func (w *remoteWorker) get(id uint64) *sched.Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leases[id]
}

// lease waits for credits and answers each with a batch of leases,
// sized by the queue (sched.Queue.BatchSize: one lease until the tasks'
// run time is known, and during the queue's probe phase at most
// sched.ProbeLeases per worker: the rest of the credits wait in Next);
// the batches ready at once go out in one message.
func (w *remoteWorker) lease(ctx context.Context) error {
	credit := 0
	for {
		credit += int(w.credit.Swap(0))
		if credit == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-w.creditKick:
				continue
			}
		}
		l, err := w.s.q.Next(ctx, w.peer.Name)
		if err != nil {
			if errors.Is(err, sched.ErrExcluded) {
				return errExcluded
			}
			if errors.Is(err, errDrained) {
				w.awaitEnd(ctx)
				return err
			}
			return nil
		}
		var batch []*sched.Lease
		var msgs []*peerpb.Lease
		size := 0
		add := func(l *sched.Lease) {
			batch = append(batch, l)
			msgs = append(msgs, w.leaseMsg(l))
			size += len(msgs[len(msgs)-1].Params)
		}
		room := func() bool { return len(msgs) < peerpb.MaxBatch && size < peerpb.MaxBatchBytes }
		for first := true; credit > 0 && room(); first = false {
			if !first {
				if l = w.s.q.TryNext(w.peer.Name); l == nil {
					break
				}
			}
			credit--
			head := len(msgs)
			add(l)
			for n := w.s.q.BatchSize(w.peer.Name); len(msgs)-head < n && room(); {
				l := w.s.q.TryNext(w.peer.Name)
				if l == nil {
					break
				}
				add(l)
			}
			if k := len(msgs) - head; k > 1 {
				msgs[head].Batch = uint32(k)
				w.s.q.Batched(batch[head:])
			}
		}
		w.mu.Lock()
		for _, l := range batch {
			w.leases[l.ID] = l
		}
		w.mu.Unlock()
		msg := &peerpb.ToPeer{Msg: &peerpb.ToPeer_Lease{Lease: msgs[0]}}
		if len(msgs) > 1 {
			msg = &peerpb.ToPeer{Msg: &peerpb.ToPeer_Leases{Leases: &peerpb.Leases{Leases: msgs}}}
		}
		if phasetrace.On() {
			for _, l := range batch {
				phasetrace.At("c.lease", l.ID, l.Start)
			}
		}
		select {
		case w.outbox <- msg:
		case <-ctx.Done():
			return nil
		}
		for _, l := range batch {
			l.OnRevoke(func() { w.revoked(ctx, l) })
		}
	}
}

// maxCredit bounds the credit a peer can hold unanswered (a peer asks
// for about as many leases as it has free slots; more is a broken peer).
const maxCredit = 1 << 16

// addCredit adds n to what the peer asked for (at most maxCredit in all)
// and wakes the leaser. It never blocks: the receive loop calls it, and
// results must keep coming in while the leaser waits for a task.
func (w *remoteWorker) addCredit(n int64) {
	for {
		c := w.credit.Load()
		if w.credit.CompareAndSwap(c, min(c+n, maxCredit)) {
			break
		}
	}
	select {
	case w.creditKick <- struct{}{}:
	default:
	}
}

// awaitEnd: no task is left to lease. If the job is over, the session
// stays until it told the peer (End), so that the peer does not take the
// session's end for a lost coordinator; the run ends it otherwise.
func (w *remoteWorker) awaitEnd(ctx context.Context) {
	if all, _ := w.s.q.Done(); !all || !w.acks.on {
		return
	}
	select {
	case <-w.endSent:
	case <-ctx.Done():
	}
}

func (w *remoteWorker) leaseMsg(l *sched.Lease) *peerpb.Lease {
	return &peerpb.Lease{
		LeaseId: l.ID, TaskId: l.TaskID, Attempt: uint32(l.Attempt), Params: w.s.r.params(l),
		DigestOnly: l.DigestOnly,
	}
}

// revoked tells the peer to stop a lease that was taken back (one it
// still holds: a settled lease is no longer the worker's). It is called
// by the queue, perhaps with its locks held: the message goes out from a
// goroutine of its own.
func (w *remoteWorker) revoked(ctx context.Context, l *sched.Lease) {
	if w.get(l.ID) == nil {
		return
	}
	go func() {
		select {
		case w.outbox <- &peerpb.ToPeer{Msg: &peerpb.ToPeer_Cancel{Cancel: &peerpb.Cancel{LeaseId: l.ID}}}:
		case <-ctx.Done():
		}
	}()
}

// settle turns a peer's result into a lease result: outputs are fetched
// (inline or as blocks), staged and checked against the peer's digest. It
// returns the lease, nil if it is unknown.
func (w *remoteWorker) settle(ctx context.Context, res *peerpb.Result) *sched.Lease {
	w.mu.Lock()
	l := w.leases[res.LeaseId]
	delete(w.leases, res.LeaseId)
	w.mu.Unlock()
	if l == nil {
		w.forged(res)
		return nil
	}
	out := sched.Result{Outcome: res.Outcome, Start: time.Unix(0, res.StartedUnixNano).UTC(), End: time.Unix(0, res.EndedUnixNano).UTC(), Device: res.Device}
	if res.EndedUnixNano == 0 {
		out.End = time.Now().UTC()
	}
	if res.Error != "" {
		out.Err = errors.New(res.Error)
	}
	switch res.Outcome {
	case report.OutcomeLost:
		out.Fault = sched.FaultLost // the peer says it lost the attempt
	case report.OutcomeOK, report.OutcomeTaskError, report.OutcomeCrashed, report.OutcomeTimeout, report.OutcomeCanceled:
	default:
		out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("peer %s sent an unknown outcome %q", w.peer.Name, res.Outcome), sched.FaultMalformed
	}
	if out.Outcome == report.OutcomeOK && l.DigestOnly {
		d, err := digest.FromBytes(res.Digest)
		if err != nil {
			out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("peer %s sent a bad digest: %w", w.peer.Name, err), sched.FaultMalformed
		} else {
			out.Digest = d
			out.Fetch = func(ctx context.Context, dir string) error {
				_, _, err := w.stage(ctx, dir, res)
				return err
			}
		}
	} else if out.Outcome == report.OutcomeOK && inlineOnly(res.Outputs) && !w.s.r.verifier {
		// The usual result of a small task: checked and kept in memory,
		// on to the job database without a folder.
		d, files, data, err := inlineResult(res)
		if err != nil {
			out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("collect output from %s: %w", w.peer.Name, err), sched.FaultMalformed
		} else {
			out.Inline, out.Digest, out.Files, out.Data = true, d, files, data
		}
	} else if out.Outcome == report.OutcomeOK {
		stage := filepath.Join(w.s.workRoot, l.TaskID+"."+strconv.FormatUint(l.ID, 10)+".out")
		d, files, err := w.stage(ctx, stage, res)
		if err == nil && w.s.r.verifier {
			if err = w.s.r.verifyOutput(ctx, l, stage, files); errors.Is(err, errRejected) {
				os.RemoveAll(stage)
				out.Outcome, out.Err = report.OutcomeRejected, err
				w.s.q.Finish(l, out)
				return l
			}
		}
		if err != nil {
			os.RemoveAll(stage)
			out.Outcome, out.Err = report.OutcomeLost, fmt.Errorf("collect output from %s: %w", w.peer.Name, plain.Error(err))
			switch {
			case ctx.Err() != nil, errors.Is(err, ErrLocalDisk):
				// The submitter's own disk: nobody's strike, and the run stops.
				out.Outcome = report.OutcomeCanceled
			case errors.Is(err, errMalformed):
				out.Fault = sched.FaultMalformed
			case errors.Is(err, errUndelivered):
				out.Fault = sched.FaultLost
			}
		} else {
			out.Stage, out.Digest, out.Files = stage, d, files
		}
	}
	w.s.q.Finish(l, out)
	phasetrace.Mark("c.settled", l.ID)
	return l
}

// forged charges the peer with a result for a lease it does not hold
// (never held, or already settled): a malformed result, logged the first
// time only (a liar may send them by the thousand).
func (w *remoteWorker) forged(res *peerpb.Result) {
	err := fmt.Errorf("%w: a result for lease %d, which the peer does not hold", errMalformed, res.LeaseId)
	excluded := w.s.q.Forged(w.peer.Name, err)
	if w.forgedSeen.CompareAndSwap(false, true) {
		w.s.r.log.Warn("peer sent a result for a lease it does not hold: a malformed result (logged once)", "peer", w.peer.Name, "lease", res.LeaseId, "excluded", excluded)
	}
}

// Why collecting a peer's output failed, when it is the peer's fault (a
// failure of the submitter's own disk is nobody's strike).
var (
	// errMalformed: the result contradicts itself (names, sizes, digest).
	errMalformed = errors.New("malformed result")
	// errUndelivered: the peer did not serve the output's blocks.
	errUndelivered = errors.New("output not delivered")
)

// maxInline bounds an inline output file; larger ones must travel as blocks.
const maxInline = 4 << 20

// stage gets a peer's output into the folder stage and checks it against
// the peer's digest. A write that fails for a reason of this machine's
// own disk (full, read-only) comes back wrapping ErrLocalDisk, and stops
// the run: the peer is not to blame.
func (w *remoteWorker) stage(ctx context.Context, stage string, res *peerpb.Result) (digest.ID, []string, error) {
	d, files, err := w.stageFiles(ctx, stage, res)
	return d, files, w.s.r.outputFault(err)
}

func (w *remoteWorker) stageFiles(ctx context.Context, stage string, res *peerpb.Result) (digest.ID, []string, error) {
	if inlineOnly(res.Outputs) {
		return stageInline(stage, res)
	}
	ro := w.s.r.opts.Remote
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return digest.ID{}, nil, err
	}
	root, err := os.OpenRoot(stage)
	if err != nil {
		return digest.ID{}, nil, err
	}
	defer root.Close()
	for _, o := range res.Outputs {
		if err := outputs.CheckName(o.Name); err != nil {
			return digest.ID{}, nil, fmt.Errorf("%w: %w", errMalformed, err)
		}
		name := filepath.Clean(filepath.FromSlash(o.Name))
		if !filepath.IsLocal(name) {
			return digest.ID{}, nil, fmt.Errorf("%w: output name %q is not a local path", errMalformed, o.Name)
		}
		if dir := filepath.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return digest.ID{}, nil, err
			}
		}
		switch {
		case len(o.FileId) == 0:
			if err := checkInline(o); err != nil {
				return digest.ID{}, nil, err
			}
			if err := root.WriteFile(name, o.Data, 0o644); err != nil {
				return digest.ID{}, nil, err
			}
		default:
			id, err := blocks.IDFromBytes(o.FileId)
			if err != nil {
				return digest.ID{}, nil, fmt.Errorf("%w: output %q: %w", errMalformed, o.Name, err)
			}
			f := transfer.NewFetcher(ro.Store, ro.Conns, transfer.FetchOptions{Logger: w.s.r.log})
			if _, err := f.Fetch(ctx, id, []string{w.peer.Addr}, nil); err != nil {
				if err := w.s.r.storeFault(ro.Store, err); errors.Is(err, ErrLocalDisk) {
					return digest.ID{}, nil, fmt.Errorf("output %q: %w", o.Name, err)
				}
				return digest.ID{}, nil, fmt.Errorf("%w: output %q: %w", errUndelivered, o.Name, err)
			}
			if err := blocks.ExportFile(ctx, ro.Store, id, filepath.Join(stage, name)); err != nil {
				return digest.ID{}, nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
		}
	}
	d, files, err := outputs.Digest(stage)
	if err != nil {
		return digest.ID{}, nil, err
	}
	if !bytes.Equal(res.Digest, d[:]) {
		return digest.ID{}, nil, fmt.Errorf("%w: output digest mismatch: peer said %.6x, files hash to %.12s", errMalformed, res.Digest, d.String())
	}
	return d, files, nil
}

// inlineResult checks an output that is only inline data (or nothing)
// against the peer's digest, in memory: files is [sdk.DataFile], or none.
func inlineResult(res *peerpb.Result) (digest.ID, []string, []byte, error) {
	var data []byte
	var files []string
	if len(res.Outputs) == 1 {
		o := res.Outputs[0]
		if err := checkInline(o); err != nil {
			return digest.ID{}, nil, nil, err
		}
		data, files = o.Data, []string{sdk.DataFile}
		if data == nil {
			data = []byte{} // an empty data file, not none
		}
	}
	d := outputs.DigestInline(data)
	if !bytes.Equal(res.Digest, d[:]) {
		return digest.ID{}, nil, nil, fmt.Errorf("%w: output digest mismatch: peer said %.6x, data hashes to %.12s", errMalformed, res.Digest, d.String())
	}
	return d, files, data, nil
}

// stageInline stages an output that is only inline data (or nothing),
// for the plugin's Verify or a fetch, with the fewest file system calls
// (mkdir, create, write, close).
func stageInline(stage string, res *peerpb.Result) (digest.ID, []string, error) {
	d, files, data, err := inlineResult(res)
	if err != nil {
		return digest.ID{}, nil, err
	}
	if err := os.Mkdir(stage, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return digest.ID{}, nil, err
	}
	if files != nil {
		if err := os.WriteFile(filepath.Join(stage, sdk.DataFile), data, 0o644); err != nil {
			return digest.ID{}, nil, err
		}
	}
	return d, files, nil
}

// checkInline checks an inline output's size against its claim and the
// inline bound.
func checkInline(o *peerpb.Output) error {
	if len(o.Data) > maxInline || int64(len(o.Data)) != o.Size {
		return fmt.Errorf("%w: output %q: inline size %d does not match %d", errMalformed, o.Name, len(o.Data), o.Size)
	}
	return nil
}

// inlineOnly: the output is nothing, or just the inline data file.
func inlineOnly(outs []*peerpb.Output) bool {
	return len(outs) == 0 || (len(outs) == 1 && outs[0].Name == sdk.DataFile && len(outs[0].FileId) == 0)
}
