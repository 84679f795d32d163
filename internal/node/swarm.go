package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/transfer"
)

// Candidate is a peer that might take a job's tasks.
type Candidate struct {
	Name string
	// ID is the node ID the peer gossips ("" for a static peer known by
	// its address alone): its handshake must prove it.
	ID   string
	Addr string // gRPC
	// Slots > 0 and a compatible protocol: the peer takes work.
	Slots      int
	Compatible bool
	OS, Arch   string
}

// Members supplies the live peers of the swarm (the gossip membership).
type Members interface {
	// Candidates returns the peers currently alive.
	Candidates() []Candidate
	// Changed returns a channel that is closed at the next change.
	Changed() <-chan struct{}
	// Failed reports whether the membership declared the peer name failed
	// (it stopped answering) and has not seen it come back.
	Failed(name string) bool
}

// Swarm enrols peers into a job: the live members of the membership, and
// static addresses (--join) whose Info is asked. A peer that vanishes from
// the membership, or that the membership declares failed (a static peer
// too: its connection may take the gRPC keepalive's 10 s or more to
// break), has its session ended at once, so its leases are requeued; it
// is enrolled again when it comes back. A static peer that cannot be
// reached is retried.
type Swarm struct {
	Self    string // this node's name: never enrolled
	Static  []string
	Members Members // may be nil
	Conns   *transfer.Pool
	Logger  *slog.Logger
	// Retry is the wait before enrolling a peer again after its session
	// failed (default 1s).
	Retry time.Duration

	mu        sync.Mutex
	unreached string // why static peers did not answer, last round
}

// Unreached says which static peers did not answer when last asked, and
// why ("peer 127.0.0.1:1: nothing listens there (connection refused)"),
// or "" when all did.
func (sw *Swarm) Unreached() string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.unreached
}

// Serve enrols peers into the job jobID until ctx ends: enrol runs one
// peer's work session (job.Swarm, which this type implements). Each round
// (at a membership change, or every Retry/2) it works out the peers
// wanted, ends the sessions of those gone, and enrols the new ones.
func (sw *Swarm) Serve(ctx context.Context, jobID, goos, goarch string, enrol func(ctx context.Context, name, id, addr string, client peerpb.PeerClient) error) {
	e := sw.newEnroller(jobID, goos, goarch, enrol)
	defer e.wg.Wait()
	tick := time.NewTicker(e.retry / 2)
	defer tick.Stop()
	for {
		want, changed := e.wanted(ctx)
		e.endGone(want)
		e.enrolNew(ctx, want)
		select {
		case <-ctx.Done():
			e.endAll()
			return
		case <-changed:
		case <-e.answered:
		case <-tick.C:
		}
	}
}

// enroller is the state of one Serve call.
type enroller struct {
	sw           *Swarm
	log          *slog.Logger
	retry        time.Duration
	goos, goarch string
	enrol        func(ctx context.Context, name, id, addr string, client peerpb.PeerClient) error

	wg     sync.WaitGroup        // the sessions, and the asking of static peers
	active map[string]*enrolment // by peer name; Serve's goroutine only
	static *discovery.Resolver   // the --join peers
	// asking: a goroutine asks the static peers that have not answered
	// (askStatic); answered: one of them answered, a round is due.
	asking   atomic.Bool
	answered chan struct{}

	mu       sync.Mutex // guards refused, failedAt and held, written as sessions end
	refused  map[string]bool
	failedAt map[string]time.Time
	// held: a peer whose refusal may pass (peerpb.RefusalPasses) is asked
	// again after the time given, the wait doubling with each refusal.
	held map[string]heldRefusal
}

// heldRefusal is a peer that refused the job for a reason that may pass.
type heldRefusal struct {
	until time.Time
	times int
}

// Waits before asking again a peer whose refusal may pass.
const (
	refusalRetry    = 5 * time.Second
	refusalRetryMax = time.Minute
)

// enrolment is one peer's running session.
type enrolment struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (sw *Swarm) newEnroller(jobID, goos, goarch string, enrol func(ctx context.Context, name, id, addr string, client peerpb.PeerClient) error) *enroller {
	log := sw.Logger
	if log == nil {
		log = slog.Default()
	}
	retry := sw.Retry
	if retry <= 0 {
		retry = time.Second
	}
	e := &enroller{
		sw:       sw,
		log:      log.With("component", "swarm", "job", short(jobID)),
		retry:    retry,
		goos:     goos,
		goarch:   goarch,
		enrol:    enrol,
		active:   map[string]*enrolment{},
		refused:  map[string]bool{},
		failedAt: map[string]time.Time{},
		held:     map[string]heldRefusal{},
		answered: make(chan struct{}, 1),
	}
	e.static = &discovery.Resolver{Addrs: sw.Static, Resolve: ResolveStatic(sw.Conns), Answered: func() {
		select {
		case e.answered <- struct{}{}:
		default:
		}
	}}
	return e
}

// wanted returns the peers that can take the job, by name: the live
// members that take work on the job's platform, and the static peers
// that have answered (each is asked its name until it answers once, in
// the background: askStatic). changed is closed at the membership's next
// change (nil without a membership).
func (e *enroller) wanted(ctx context.Context) (want map[string]Candidate, changed <-chan struct{}) {
	want = map[string]Candidate{}
	if m := e.sw.Members; m != nil {
		changed = m.Changed()
		for _, c := range m.Candidates() {
			if e.takesJob(c) {
				want[c.Name] = c
			}
		}
	}
	e.askStatic(ctx)
	for _, p := range e.static.Known() {
		if m := e.sw.Members; m != nil && m.Failed(p.Name) {
			continue // declared failed: not wanted until it comes back
		}
		if _, ok := want[p.Name]; !ok && p.Name != e.sw.Self {
			want[p.Name] = Candidate{Name: p.Name, Addr: p.Addr, Slots: 1, Compatible: true}
		}
	}
	return want, changed
}

// askStatic asks the static peers that have not answered yet, in the
// background, unless it is asking them already. Each answer starts a
// round (Resolver.Answered), so a peer is enrolled as soon as it has
// answered, not once every address has answered or timed out: a silent
// address held back the whole swarm's enrolment by resolveTimeout, and a
// thousand addresses by their handshakes. The silent ones are asked again
// in a later round.
func (e *enroller) askStatic(ctx context.Context) {
	if len(e.static.Addrs) == 0 || !e.asking.CompareAndSwap(false, true) {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.asking.Store(false)
		_, err := e.static.Find(ctx)
		why := ""
		if err != nil && ctx.Err() == nil {
			why = strings.ReplaceAll(err.Error(), "\n", "; ")
		}
		e.sw.mu.Lock()
		e.sw.unreached = why
		e.sw.mu.Unlock()
	}()
}

// takesJob: c is another node that takes work, speaks the protocol and
// runs the job's platform (when both say which; a job that gives none
// runs on every platform).
func (e *enroller) takesJob(c Candidate) bool {
	switch {
	case c.Name == e.sw.Self || c.Slots <= 0 || !c.Compatible || c.Addr == "":
		return false
	case c.OS != "" && e.goos != "" && (c.OS != e.goos || c.Arch != e.goarch):
		return false
	}
	return true
}

// endGone forgets the sessions that ended and ends those of peers no
// longer wanted (gone from the membership): their leases are requeued.
func (e *enroller) endGone(want map[string]Candidate) {
	for name, en := range e.active {
		select {
		case <-en.done:
			delete(e.active, name)
			continue
		default:
		}
		if _, ok := want[name]; !ok {
			e.log.Info("peer left the swarm or was declared failed; ending its session", "peer", name)
			en.cancel()
			delete(e.active, name)
		}
	}
}

// enrolNew starts a session with every wanted peer that has none, did not
// refuse the job, and did not fail within the retry wait.
func (e *enroller) enrolNew(ctx context.Context, want map[string]Candidate) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, c := range want {
		if e.active[name] != nil || e.refused[name] || time.Since(e.failedAt[name]) < e.retry || time.Now().Before(e.held[name].until) {
			continue
		}
		conn, err := e.sw.Conns.Conn(c.Addr)
		if err != nil {
			e.failedAt[name] = time.Now()
			continue
		}
		ectx, cancel := context.WithCancel(ctx)
		en := &enrolment{cancel: cancel, done: make(chan struct{})}
		e.active[name] = en
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer close(en.done)
			defer cancel()
			e.ended(c.Name, e.enrol(ectx, c.Name, c.ID, c.Addr, peerpb.NewPeerClient(conn)))
		}()
	}
}

// ended records how a peer's session ended: a refusal is final for the
// job unless its cause may pass (then the peer is asked again after
// refusalRetry, doubling up to refusalRetryMax), another error waits the
// retry time.
func (e *enroller) ended(name string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var refusal *peerpb.RefusedError
	switch {
	case errors.As(err, &refusal) && peerpb.RefusalPasses(refusal.Reason):
		h := e.held[name]
		wait := min(refusalRetry<<min(h.times, 8), refusalRetryMax)
		h.times++
		h.until = time.Now().Add(wait)
		e.held[name] = h
		e.log.Info("peer refused the job for a reason that may pass; asking again later", "peer", name, "in", wait, "reason", refusal.Reason)
	case errors.Is(err, peerpb.ErrRefused):
		e.refused[name] = true
	case err != nil:
		e.log.Info("peer session ended", "peer", name, "err", err)
		e.failedAt[name] = time.Now()
	}
}

// endAll ends every session (Serve waits for them).
func (e *enroller) endAll() {
	for _, en := range e.active {
		en.cancel()
	}
}
