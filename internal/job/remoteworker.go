package job

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/report"
)

// remoteWorker runs the protocol of one peer's work session: it leases
// tasks to the peer as it asks for them (credit), relays host calls and
// revocations, takes handed-over results, and settles the peer's results
// (remoteoutput.go checks their outputs) with the queue.
type remoteWorker struct {
	s      *Session
	peer   Peer
	stream peerpb.Peer_WorkClient

	mu     sync.Mutex              // a leaf
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
			// The results queued behind it (a peer's batch comes in one
			// message) are taken too: the quick ones are settled together,
			// the others each on a goroutine of its own.
			var quick []*peerpb.Result
			for res != nil {
				if r := res; w.quick(r) {
					quick = append(quick, r)
				} else if !w.settleOne(ctx, &rwg, sem, func() { w.settled(w.settle(ctx, r), r) }) {
					return
				}
				res = nil
				if len(quick) < peerpb.MaxBatch {
					select {
					case res = <-results:
					default:
					}
				}
			}
			if len(quick) > 0 && !w.settleOne(ctx, &rwg, sem, func() { w.settleAll(ctx, quick) }) {
				return
			}
		}
	}
}

// settleOne runs settle on a goroutine once one of sem's places is free.
// It returns false if ctx ended first.
func (w *remoteWorker) settleOne(ctx context.Context, rwg *sync.WaitGroup, sem chan struct{}, settle func()) bool {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		defer func() { <-sem }()
		settle()
	}()
	return true
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
		if err := w.s.r.leasable(ctx); err != nil {
			return nil
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
			msgs = append(msgs, w.leaseMsg(ctx, l))
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

func (w *remoteWorker) leaseMsg(ctx context.Context, l *sched.Lease) *peerpb.Lease {
	return &peerpb.Lease{
		LeaseId: l.ID, TaskId: l.TaskID, Attempt: uint32(l.Attempt), Params: w.s.r.params(l),
		DigestOnly: l.DigestOnly, Inputs: w.s.r.ownInputIndexes(l.Task), Files: w.s.r.leaseFiles(ctx, l.Task),
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
