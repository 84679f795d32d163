package job

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

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
	sessions map[string]*PeerSession
}

// PeerSession is the state of the job's work session with one peer.
type PeerSession struct {
	// Peer is the coordinator's key, "name@NODEID" (report.SplitPeer).
	Peer  string
	Slots int
	// Up: the session runs; otherwise it ended at Ended, with Err when
	// it broke (the peer died or the connection failed).
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

// ReadReport calls fn with the job's live report, holding the lock under
// which the coordinator changes it: fn must be quick, must not change it
// and must keep no reference into it. Before the job starts it does not
// call fn and reports false.
func (l *Live) ReadReport(fn func(*report.Report)) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	r := l.r
	l.mu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rep == nil || r.recs == nil {
		return false
	}
	// The records not in memory are read from the job database: a
	// watcher of a large job pays for reading it, the run does not.
	rep := *r.rep
	rep.Tasks = make([]report.Task, 0, r.recs.Len())
	ctx := context.Background()
	ro, err := jobdb.OpenReadOnly(ctx, r.db.Path())
	if err != nil {
		r.log.Warn("read the job database for a watcher", "err", err)
		return false
	}
	defer ro.Close()
	if err := r.recs.each(ctx, ro, func(_ int, t *report.Task) error {
		rep.Tasks = append(rep.Tasks, *t)
		return nil
	}); err != nil {
		r.log.Warn("read the job database for a watcher", "err", err)
		return false
	}
	fn(&rep)
	return true
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
	l.sessions[peer] = &PeerSession{Peer: peer, Slots: slots, Up: true, Since: time.Now()}
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
