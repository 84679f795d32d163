package job

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/jobdb"
)

// The hand-over gate of a resumed run.
//
// Peers of the run's last coordinator may hold results it never
// committed (they finished them while it was gone, or it died before it
// acknowledged them): a task such a peer finished must not be leased to
// anyone before the peer has handed it over. The job database lists the
// peers of the last coordinator's sessions (jobdb.SessionsKey, kept as
// peers enrol, each committed before its first lease: sessionList.durable);
// a resumed run holds every lease back until each of them
// has enrolled and handed over what it holds (Welcome.handovers says how
// much), refused, or failed to connect, and no longer: a swarm whose
// peers all come back leases as soon as the last hand-over is in. A peer
// that has not enrolled within handoverBound (dead, gone, or slow to be
// found) is not waited for; it is dropped from the list. One that has
// answered (its handshake named it) is waited for until its hand-over is
// in or its session ends (its results arrive on a live stream, however
// long the queue takes to adopt them), at most handoverMax. The tasks a
// peer still runs for the last coordinator (Welcome.running) are not
// waited for here: each is leased to that peer at once and held for it
// until it hands the task over (remoteWorker.hold). A peer not on the list that enrols in
// the run's first handoverWindow with results to hand over holds leases
// back while it hands over (at most handoverHold).

const (
	// handoverBound bounds how long a resumed run waits for the peers of
	// the last coordinator to enrol, handoverMax for their hand-overs.
	handoverBound = 5 * time.Second
	handoverMax   = time.Minute
	// handoverWindow: a peer not on the list that enrols this soon after a
	// resumed run starts holds leases back while it hands over; later ones
	// were not there when the run was resumed.
	handoverWindow = 10 * time.Second
	// handoverHold bounds such a peer's hold.
	handoverHold = 2 * time.Second
)

// handoverGate holds the job's leases back until the peers of the last
// coordinator have handed over.
type handoverGate struct {
	log     *slog.Logger
	release func()
	timer   *time.Timer
	// gone is called with the peers that did not come in time.
	gone func(peers []string)

	mu      sync.Mutex
	waiting map[string]bool // peer (name@id) whose hand-over is still to come -> it enrolled
	started time.Time
}

// newHandoverGate holds q's leases until every peer of expected has
// handed over (done), or handoverBound passed. nil: nobody to wait for.
func newHandoverGate(q *sched.Queue, expected []string, log *slog.Logger, gone func([]string)) *handoverGate {
	if len(expected) == 0 {
		return nil
	}
	g := &handoverGate{log: log, gone: gone, waiting: map[string]bool{}, started: time.Now()}
	for _, p := range expected {
		g.waiting[p] = false
	}
	g.release = q.Hold()
	log.Info("resumed run: leases wait for the last run's peers to hand over", "peers", len(expected), "enrol_within", handoverBound)
	log.Debug("resumed run: the last run's peers", "list", strings.Join(expected, ","))
	g.timer = time.AfterFunc(handoverBound, g.expire)
	return g
}

// enrolled: peer (name@id) answered and will hand over; it is waited for
// past handoverBound.
func (g *handoverGate) enrolled(peer string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.waiting[peer]; ok {
		g.waiting[peer] = true
	}
}

// expects reports whether a peer of node name (the name it goes by before
// its handshake proves its ID) is waited for.
func (g *handoverGate) expects(name string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range g.waiting {
		if peerNodeName(p) == name {
			return true
		}
	}
	return false
}

// done: peer (name@id) has handed over everything it announced, or will
// not (it refused the job, or its session ended).
func (g *handoverGate) done(peer string) {
	g.forget(func(p string) bool { return p == peer })
}

// failed: the peers of node name could not be reached (before the
// handshake named them): they are not waited for.
func (g *handoverGate) failed(name string) {
	g.forget(func(p string) bool { return peerNodeName(p) == name })
}

func (g *handoverGate) forget(match func(string) bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	n := len(g.waiting)
	maps.DeleteFunc(g.waiting, func(p string, _ bool) bool { return match(p) })
	last := n > 0 && len(g.waiting) == 0
	timer := g.timer
	g.mu.Unlock()
	if last {
		timer.Stop()
		g.log.Info("the last run's peers handed over; leasing", "after", time.Since(g.started).Round(time.Millisecond))
		g.release()
	}
}

// expire ends the wait for the peers that did not enrol in time; after
// handoverMax, for every peer.
func (g *handoverGate) expire() {
	all := time.Since(g.started) >= handoverMax
	g.mu.Lock()
	var late []string
	for p, in := range g.waiting {
		if !in || all {
			late = append(late, p)
			delete(g.waiting, p)
		}
	}
	left := len(g.waiting)
	if left > 0 { // enrolled, handing over: wait for them up to handoverMax
		g.timer = time.AfterFunc(time.Until(g.started.Add(handoverMax)), g.expire)
	}
	g.mu.Unlock()
	slices.Sort(late)
	if len(late) > 0 {
		g.log.Info("peers of the last run did not hand over in time; leasing without them (what they kept runs again)", "peers", late, "waited", time.Since(g.started).Round(time.Millisecond))
		g.gone(late)
	}
	if left > 0 {
		return
	}
	if len(late) > 0 {
		g.release()
	}
}

// peerNodeName is the node name of a peer named name@id.
func peerNodeName(peer string) string {
	name, _, _ := strings.Cut(peer, "@")
	return name
}

// sessionList is the peers (name@id) of the run's coordinator sessions,
// kept in the job database (jobdb.SessionsKey) for the next rerun: those
// enrolled, and those of the last run that may still come. A change
// queues one write of the list, unless one is queued that has not yet
// taken it; the write takes the list when its batch commits. So the list
// is marshalled once per journal batch, not once per enrolment (at 1,000
// peers, 1,000 sorted lists of up to 40 KB), and it is still in the
// journal no later than anything its caller queues after the change
// (the session's leases).
type sessionList struct {
	// send is held while a change queues its write, so that a change
	// that finds a write queued returns only once that write is in the
	// journal's queue. Taken before mu.
	send sync.Mutex
	// mu guards the fields below; a leaf (the journal's writer takes it).
	mu       sync.Mutex
	peers    map[string]bool
	queued   bool // a write is queued that has not taken the list yet
	marshals int  // how many times a write took the list
	// version counts the changes; durableAt is the last version known
	// to be in job.db (durable).
	version, durableAt uint64
}

// lastSessions reads the peers of the last coordinator's sessions.
func lastSessions(ctx context.Context, db *jobdb.DB) []string {
	v, err := db.JobValue(ctx, jobdb.SessionsKey)
	if err != nil || v == "" {
		return nil
	}
	var peers []string
	if json.Unmarshal([]byte(v), &peers) != nil {
		return nil
	}
	return peers
}

// change adds (or removes) peers and, if the list changed, makes sure a
// write of it is queued in the journal. It returns the list's version
// after the change, for durable.
func (s *sessionList) change(r *runner, add bool, peers ...string) uint64 {
	s.send.Lock()
	defer s.send.Unlock()
	s.mu.Lock()
	if s.peers == nil {
		s.peers = map[string]bool{}
	}
	changed := false
	for _, p := range peers {
		if s.peers[p] != add {
			changed = true
			if add {
				s.peers[p] = true
			} else {
				delete(s.peers, p)
			}
		}
	}
	if changed {
		s.version++
	}
	v := s.version
	queue := changed && !s.queued
	s.queued = s.queued || queue
	s.mu.Unlock()
	if !queue {
		return v
	}
	if err := r.db.PutJobValueFunc(jobdb.SessionsKey, s.take); err != nil {
		s.mu.Lock()
		s.queued = false
		s.mu.Unlock()
		r.log.Debug("journal the peers' sessions", "err", err)
	}
	return v
}

// durable waits until the list of version v (change's result), and the
// job's own row, are in job.db. A peer gets no lease before the list
// naming it is durable: a rerun waits for the hand-over of every peer
// that may hold a result of the job (newHandoverGate) only if that peer
// is on the list it reads, and a coordinator killed between the peer's
// first lease and the list's commit left a list without it. The write
// holding v was queued before
// this call (by this change or by an earlier one whose write takes the
// list only as its batch commits), so a Flush that returns covers it;
// enrolments that a commit already covered do not flush again.
func (s *sessionList) durable(ctx context.Context, r *runner, v uint64) error {
	s.mu.Lock()
	done := s.durableAt >= v
	s.mu.Unlock()
	if done {
		return nil
	}
	// The list is no use without the job's own row (its ID, the run's
	// name): a rerun that finds no job in job.db starts a new run, and the
	// peers hand nothing over to it (they keep their results for the run
	// they worked for). The journal writes that row at its first pass,
	// which the first lease starts: queued here, the Flush covers it.
	if err := r.queueJob(); err != nil {
		return fmt.Errorf("journal the job before the peers' sessions: %w", err)
	}
	if err := r.db.Flush(ctx); err != nil {
		return fmt.Errorf("journal the peers' sessions: %w", err)
	}
	s.mu.Lock()
	s.durableAt = max(s.durableAt, v)
	s.mu.Unlock()
	return nil
}

// take is the list as the journal writes it, sorted, in JSON; the next
// change queues a new write.
func (s *sessionList) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = false
	s.marshals++
	b, _ := json.Marshal(slices.Sorted(maps.Keys(s.peers)))
	return string(b)
}
