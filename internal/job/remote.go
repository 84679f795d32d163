package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"

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
	phasetrace.Mark("c.enrol", 0)
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
		if isStale(m.Refuse.Reason) {
			s.r.fenced(m.Refuse.Reason)
		}
		return fmt.Errorf("enrol %s: %w", peer.Name, &peerpb.RefusedError{Reason: m.Refuse.Reason})
	case *peerpb.FromPeer_Welcome:
		phasetrace.Mark("c.welcome", 0)
		log.Info("peer enrolled", "slots", m.Welcome.Slots, "handovers", m.Welcome.Handovers)
		if err := s.peers.durable(ctx, s.r, s.peers.change(s.r, true, peer.Name)); err != nil {
			return failed(err)
		}
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
