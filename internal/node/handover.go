package node

import (
	"context"
	"fmt"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
)

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
