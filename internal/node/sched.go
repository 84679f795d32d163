package node

import (
	"context"
	"sync"
)

// sched shares a node's slots between work sessions: slot runners take
// queued leases from the sessions in round-robin order; each session is
// granted Pull credits up to its fair share plus a prefetch window.
// Slots 0 to slots-1 are CPU slots, the gpus after them GPU slots: a
// session of a GPU job (session.gpu) runs on GPU slots only, others on
// CPU slots only, and the fair shares are counted per kind.
type sched struct {
	slots int
	gpus  int

	mu sync.Mutex // a leaf: never held while another lock is taken
	// wake holds the idle runners of each kind of slot (kind): a lease
	// wakes one that may run it.
	wake     [2]*sync.Cond
	sessions []*session
	rr       int
	closed   bool
	draining bool // no more credits: the node is shutting down
	busy     int  // running leases, all sessions
	paused   bool // the machine is busy: no credits, no starts (volunteer.go)
	// idlers are closed when busy drops to 0 (idle).
	idlers []chan struct{}
}

func newSched(slots, gpus int) *sched {
	s := &sched{slots: slots, gpus: gpus}
	for k := range s.wake {
		s.wake[k] = sync.NewCond(&s.mu)
	}
	return s
}

// kind indexes sched.wake: 0 for CPU slots, 1 for GPU slots.
func kind(gpu bool) int {
	if gpu {
		return 1
	}
	return 0
}

// wakeAll wakes every idle runner, of both kinds, to look again (close,
// pause).
func (s *sched) wakeAll() {
	for _, c := range s.wake {
		c.Broadcast()
	}
}

// run starts the slot runners; they stop when ctx ends or close is called.
// The close registered on ctx is never unregistered: a stop called once
// ctx is done could win the race against the close it registered, and the
// runners would wait for good.
func (s *sched) run(ctx context.Context, wg *sync.WaitGroup) {
	context.AfterFunc(ctx, s.close)
	for slot := range s.slots + s.gpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runner(ctx, slot)
		}()
	}
}

func (s *sched) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wakeAll()
}

func (s *sched) runner(ctx context.Context, slot int) {
	for {
		sess, batch := s.take(slot)
		if sess == nil {
			return
		}
		sess.exec(batch, slot)

		s.mu.Lock()
		s.endLocked(sess, len(batch))
		s.mu.Unlock()
	}
}

// take waits for the next batch the slot may run and counts it running;
// it returns nil once the scheduler is closed.
func (s *sched) take(slot int) (*session, []*queued) {
	gpu := slot >= s.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return nil, nil
		}
		if !s.paused {
			if sess, batch := s.pickLocked(gpu); batch != nil {
				sess.running++
				sess.runningTasks += len(batch)
				s.busy++
				return sess, batch
			}
		}
		s.wake[kind(gpu)].Wait()
	}
}

// endLocked records the end of a batch of n leases of sess.
func (s *sched) endLocked(sess *session, n int) {
	sess.running--
	sess.runningTasks -= n
	s.busy--
	if s.busy == 0 {
		for _, ch := range s.idlers {
			close(ch)
		}
		s.idlers = nil
	}
	s.topUpLocked()
}

// idle returns a channel closed once no lease runs.
func (s *sched) idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.busy == 0 {
		close(ch)
	} else {
		s.idlers = append(s.idlers, ch)
	}
	return ch
}

// pickLocked takes the next queued batch (a lease alone, or the leases
// the coordinator sent as one batch) of a session of the slot's kind
// (gpu), round robin across sessions.
func (s *sched) pickLocked(gpu bool) (*session, []*queued) {
	n := len(s.sessions)
	for i := range n {
		sess := s.sessions[(s.rr+i)%n]
		if sess.gpu == gpu && len(sess.queue) > 0 {
			k := 1
			for k < len(sess.queue) && sess.queue[k].group == sess.queue[0].group {
				k++
			}
			batch := sess.queue[:k:k]
			sess.queue = sess.queue[k:]
			sess.groups--
			s.rr = (s.rr + i + 1) % n
			return sess, batch
		}
	}
	return nil, nil
}

// window is how many batches a session of a kind (gpu) may hold
// (queued + running + credited; a batch is one lease or the leases the
// coordinator sent for one credit): its fair share of the slots of its
// kind plus a prefetch of half of it.
func (s *sched) windowLocked(gpu bool) int {
	n := 0
	for _, sess := range s.sessions {
		if sess.gpu == gpu {
			n++
		}
	}
	slots := s.slotsFor(gpu)
	share := (slots + max(n, 1) - 1) / max(n, 1)
	return share + max(1, share/2)
}

// slotsFor counts the slots of a kind: GPU slots (gpu) or CPU slots.
func (s *sched) slotsFor(gpu bool) int {
	if gpu {
		return s.gpus
	}
	return s.slots
}

// topUpLocked grants every session the credits its window allows.
func (s *sched) topUpLocked() {
	if s.draining || s.closed || s.paused {
		return
	}
	for _, sess := range s.sessions {
		w := s.windowLocked(sess.gpu)
		held := sess.groups + sess.running + sess.credited
		if want := w - held; want > 0 && sess.ready {
			sess.credited += want
			sess.pull(want)
		}
	}
}

func (s *sched) add(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = append(s.sessions, sess)
	s.topUpLocked()
}

func (s *sched) remove(sess *session) []*queued {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.sessions {
		if x == sess {
			s.sessions = append(s.sessions[:i:i], s.sessions[i+1:]...)
			break
		}
	}
	q := sess.queue
	sess.queue, sess.groups = nil, 0
	s.topUpLocked()
	return q
}

// enqueue adds a lease the coordinator sent in answer to a credit: the
// first lease of a batch (a group) takes the credit.
func (s *sched) enqueue(sess *session, item *queued) {
	s.mu.Lock()
	if n := len(sess.queue); n == 0 || sess.queue[n-1].group != item.group {
		sess.groups++
		if sess.credited > 0 {
			sess.credited--
		}
	}
	sess.queue = append(sess.queue, item)
	s.mu.Unlock()
	s.wake[kind(sess.gpu)].Signal()
}

// unqueue removes a lease that has not started; it reports whether it did.
func (s *sched) unqueue(sess *session, leaseID uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, it := range sess.queue {
		if it.lease.LeaseId == leaseID {
			if (i == 0 || sess.queue[i-1].group != it.group) && (i+1 == len(sess.queue) || sess.queue[i+1].group != it.group) {
				sess.groups-- // the last lease of its batch
			}
			sess.queue = append(sess.queue[:i:i], sess.queue[i+1:]...)
			s.topUpLocked()
			return true
		}
	}
	return false
}

// setReady marks a session ready for work (its plugin and inputs are
// local) and grants it credits.
func (s *sched) setReady(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.ready = true
	s.topUpLocked()
}

// drain stops granting credits and returns every queued lease, by session,
// so they can be handed back.
func (s *sched) drain() map[*session][]*queued {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	out := map[*session][]*queued{}
	for _, sess := range s.sessions {
		if len(sess.queue) > 0 {
			out[sess] = sess.queue
			sess.queue, sess.groups = nil, 0
		}
	}
	return out
}

// load returns the running leases and the free slots.
func (s *sched) load() (busy, free int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.slots + s.gpus - s.busy
}

// jobs is the number of sessions.
func (s *sched) jobs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
