package job

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// Live is a running job as a watcher (the web view) reads it: the live
// report under the coordinator's own lock, and the work sessions with
// peers. Give one to Run in RunOptions.Live; a nil *Live is valid and
// records nothing. Its methods are safe from any goroutine.
type Live struct {
	mu       sync.Mutex
	r        *runner
	q        *sched.Queue // the lease queue while the tasks run
	sessions map[string]*PeerSession
}

// PeerSession is the state of the job's work session with one peer.
type PeerSession struct {
	// Peer is the coordinator's key, "name@NODEID" (report.SplitPeer).
	Peer  string
	Slots int
	// Up: the session runs; otherwise it ended at Ended, with Err when
	// it broke (the peer died or the connection failed). An Up session
	// with Err is the same worker back after a session that broke.
	Up    bool
	Since time.Time
	Ended time.Time
	Err   string
}

// NewLive returns a Live to pass to Run.
func NewLive() *Live { return &Live{sessions: map[string]*PeerSession{}} }

func (l *Live) attach(r *runner) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.r = r
	l.mu.Unlock()
}

// ReadJob calls fn with the job's fields (its Tasks are nil), holding
// the lock under which the coordinator changes them: fn must be quick,
// must not change them and must keep no reference into them. Before the
// job starts it does not call fn and reports false.
func (l *Live) ReadJob(fn func(*report.Report)) bool {
	r := l.runner()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rep == nil {
		return false
	}
	fn(r.rep)
	return true
}

// EachTask calls head with a copy of the job's fields, then task with
// every task's record in task order, one at a time: those in memory
// copied under the coordinator's lock, the others read from the job
// database after it (a watcher of a large job pays for reading it, not
// for holding it; the run is held only for the copy). A record is task's
// only during the call. Before the job starts it calls neither and
// reports false; it reports false also when reading the database failed
// part way.
func (l *Live) EachTask(head func(*report.Report), task func(*report.Task)) bool {
	r := l.runner()
	if r == nil {
		return false
	}
	ctx := context.Background()
	r.mu.Lock()
	if r.rep == nil || r.recs == nil {
		r.mu.Unlock()
		return false
	}
	rep := copyHead(r.rep)
	kind, hot := r.recs.snapshot()
	err := r.recs.flush(ctx)
	path := r.db.Path()
	r.mu.Unlock()
	if err == nil {
		var ro *jobdb.DB
		if ro, err = jobdb.OpenReadOnly(ctx, path); err == nil {
			head(rep)
			err = eachRecord(ctx, ro, kind, hot, r.recs.fresh, func(_ int, t *report.Task) error {
				task(t)
				return nil
			})
			ro.Close()
		}
	}
	if err != nil {
		r.log.Warn("read the job database for a watcher", "err", err)
		return false
	}
	return true
}

func (l *Live) attachQueue(q *sched.Queue) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.q = q
	l.mu.Unlock()
}

// Running lists the attempts running now, by task ID, oldest first (the
// first copy, then replicas and backups): each with its peer's key
// (report.SplitPeer) in Peer and its start, no end and no outcome. It
// takes the lease queue's lock only, never the coordinator's: call it
// outside EachTask's callbacks.
func (l *Live) Running() map[string][]report.Attempt {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	q := l.q
	l.mu.Unlock()
	if q == nil {
		return nil
	}
	byTask := q.RunningCopies()
	out := make(map[string][]report.Attempt, len(byTask))
	for _, cs := range byTask {
		for _, c := range cs {
			out[c.TaskID] = append(out[c.TaskID], report.Attempt{Peer: c.Peer, Start: c.Start, Check: c.Check})
		}
	}
	return out
}

func (l *Live) runner() *runner {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// copyHead copies the job's fields of rep, so that they can be read
// without the runner's lock.
func copyHead(rep *report.Report) *report.Report {
	c := *rep
	c.Tasks = nil
	c.Outputs = slices.Clone(rep.Outputs)
	c.Warnings = slices.Clone(rep.Warnings)
	c.Excluded = slices.Clone(rep.Excluded)
	c.Peers = slices.Clone(rep.Peers)
	if rep.SpotChecks != nil {
		sc := *rep.SpotChecks
		sc.Caught = slices.Clone(sc.Caught)
		sc.Reinstated = slices.Clone(sc.Reinstated)
		c.SpotChecks = &sc
	}
	return &c
}

// Sessions lists the peers the job enrolled, by key.
func (l *Live) Sessions() []PeerSession {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]PeerSession, 0, len(l.sessions))
	for _, s := range l.sessions {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}

func (l *Live) sessionUp(peer string, slots int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &PeerSession{Peer: peer, Slots: slots, Up: true, Since: time.Now()}
	if prev := l.sessions[peer]; prev != nil && !prev.Up {
		// The same worker back (one node ID, one worker): its earlier
		// session's error stays, shown as past.
		s.Err = prev.Err
	}
	l.sessions[peer] = s
}

// sessionDown notes the end of peer's session and why; ended says the
// job or the swarm ended it (the job is over, or the peer left).
func (l *Live) sessionDown(peer string, err error, ended bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[peer]
	if s == nil {
		return
	}
	s.Up, s.Ended = false, time.Now()
	if !ended && !errors.Is(err, errDrained) && !errors.Is(err, errExcluded) {
		if err == nil {
			err = errors.New("session ended")
		}
		s.Err = err.Error()
	}
}
