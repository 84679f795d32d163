package job

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// Acknowledging results (protocol: Acks, End).
//
// A peer keeps each result it finished until the coordinator acknowledges
// it as durable: the job database holds what the result decided (or the
// result was not needed). Then a SIGKILLed coordinator loses nothing a
// living peer finished: its rerun is handed over every result the dead
// one had not committed.
//
// The journal hands what changed to the database in passes
// (journalLocked); each pass is numbered, and a marker behind its changes
// in the writer's queue says when the pass is committed. A result settled
// (Queue.Finish returned) while the passes count P is in pass P+1 at the
// latest: it is durable once pass P+1 is. Each peer's session gathers its
// settled results with that number and sends them as Acks, many at a
// time, whenever the committed pass moves (at most once per journal
// pass, every few tens of milliseconds). When the job is over, the
// coordinator commits the journal and sends End: the peers forget the
// run's results at once.

// durability counts the journal's passes and the last one committed.
type durability struct {
	passes    atomic.Uint64 // passes begun
	committed atomic.Uint64 // the last pass committed (with all before it)
	// replicas: results are durable only once the job's successors hold
	// them too (RunOptions.Replicate); replicated is the last pass they
	// do (replicate.go).
	replicas   bool
	replicated atomic.Uint64
	// lag: since when the successors lack a committed pass (leasegate.go).
	lag behind

	mu    sync.Mutex
	moved chan struct{} // closed (and replaced) when committed grows
}

// reached notes that pass p is committed (called by the writer's
// goroutine).
func (d *durability) reached(p uint64) {
	if p <= d.committed.Load() {
		return
	}
	d.committed.Store(p)
	d.lag.committedPast(p, d.replicated.Load())
	d.wake()
}

// wake closes the channel watch returned.
func (d *durability) wake() {
	d.mu.Lock()
	if d.moved != nil {
		close(d.moved)
		d.moved = nil
	}
	d.mu.Unlock()
}

// durableTo is the last pass durable: committed, and held by the job's
// successors when it has some.
func (d *durability) durableTo() uint64 {
	c := d.committed.Load()
	if d.replicas {
		return min(c, d.replicated.Load())
	}
	return c
}

// replicatedTo notes that the successors hold pass p.
func (d *durability) replicatedTo(p uint64) { d.replicatedAt(p, time.Now()) }

// watch returns a channel closed when the committed (or replicated)
// pass grows.
func (d *durability) watch() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moved == nil {
		d.moved = make(chan struct{})
	}
	return d.moved
}

// pending is a settled result waiting for its journal pass.
type pending struct {
	need  uint64 // the pass that makes it durable
	lease uint64 // the session's lease, or
	task  string // the task of a result handed over
}

// acker gathers a peer session's settled results until they are durable.
type acker struct {
	on bool // the peer understands Acks (Welcome.acks)
	mu sync.Mutex
	q  []pending
}

// later queues an acknowledgement of a result settled just now: of the
// session's lease, or (lease 0) of a result of task handed over.
func (w *remoteWorker) ackLater(lease uint64, task string) {
	if !w.acks.on {
		return
	}
	need := w.s.r.durable.passes.Load() + 1
	w.acks.mu.Lock()
	w.acks.q = append(w.acks.q, pending{need: need, lease: lease, task: task})
	w.acks.mu.Unlock()
	w.s.r.wake() // a pass with nothing new in it must come too
}

// ackLoop sends the peer Acks for its results as they become durable,
// until ctx ends.
func (w *remoteWorker) ackLoop(ctx context.Context) {
	if !w.acks.on {
		return
	}
	d := &w.s.r.durable
	for {
		moved := d.watch() // before the load: a pass committed after it closes moved
		for _, m := range w.acks.ready(d.durableTo()) {
			select {
			case w.outbox <- &peerpb.ToPeer{Msg: &peerpb.ToPeer_Acks{Acks: m}}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return
		}
	}
}

// ready takes the results durable by pass committed, as messages of at
// most peerpb.MaxAcks IDs.
func (a *acker) ready(committed uint64) []*peerpb.Acks {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*peerpb.Acks
	var cur *peerpb.Acks
	rest := a.q[:0]
	for _, p := range a.q {
		if p.need > committed {
			rest = append(rest, p)
			continue
		}
		if cur == nil || len(cur.LeaseIds)+len(cur.Tasks) >= peerpb.MaxAcks {
			cur = &peerpb.Acks{}
			out = append(out, cur)
		}
		if p.task != "" {
			cur.Tasks = append(cur.Tasks, p.task)
		} else {
			cur.LeaseIds = append(cur.LeaseIds, p.lease)
		}
	}
	clear(a.q[len(rest):])
	a.q = rest
	return out
}

// endWait bounds how long the end of a job waits for its database to
// commit and for its peers' sessions to send End.
const endWait = 5 * time.Second

// jobOver is called when every task is decided: once the journal is
// committed it closes s.over, and each peer's session sends End (the peer
// forgets the run's results) before the session closes. It waits for
// them, at most endWait. If the journal cannot be committed, no End goes
// out: the peers keep the results for a rerun.
func (s *Session) jobOver(ctx context.Context, state string) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	r := s.r
	r.mu.Lock()
	err := r.journalLocked()
	r.mu.Unlock()
	if err == nil {
		err = r.db.Flush(ctx)
	}
	if err == nil {
		err = r.waitReplicated(ctx)
	}
	if err != nil {
		r.log.Debug("job over, journal not committed: no End to the peers", "err", err)
		return
	}
	s.endState = state
	close(s.over)
	s.telling.wait(ctx)
	if ctx.Err() != nil {
		r.log.Debug("job over: not every peer was told within the bound", "wait", endWait)
	}
}
