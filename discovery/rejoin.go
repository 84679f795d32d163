package discovery

import (
	"context"
	"time"
)

// Re-joining after a partition. memberlist forgets a member
// GossipToTheDeadTime after declaring it dead, and never contacts it
// again by itself: when a link comes back after that, each side goes on
// as a cluster of its own. So every member remembers the gossip address
// of every other member it has seen, and while one is not alive it
// joins that address again, on a bounded backoff (rejoinMin doubling to
// rejoinMax), until it is back, leaves gracefully, or has not answered
// for rejoinGiveUp. Static (--join) and mDNS-found peers are re-joined by
// JoinFrom as well, at its own period.

const (
	rejoinMin    = time.Second
	rejoinMax    = 4 * time.Second
	rejoinGiveUp = 10 * time.Minute
	rejoinTick   = 250 * time.Millisecond
)

// rejoinTable is the plain-data core: the known members' addresses and
// when each is to be joined next. Not safe for concurrent use.
type rejoinTable struct {
	m map[string]*rejoinEntry
}

type rejoinEntry struct {
	addr    string
	alive   bool      // a live member now
	lost    time.Time // when it stopped being alive
	next    time.Time // when to join next
	backoff time.Duration
}

// seen records a live member at addr.
func (t *rejoinTable) seen(name, addr string) {
	if t.m == nil {
		t.m = map[string]*rejoinEntry{}
	}
	t.m[name] = &rejoinEntry{addr: addr, alive: true}
}

// dead records that a member stopped answering: it is joined again
// rejoinMin from now.
func (t *rejoinTable) dead(name string, now time.Time) {
	if e := t.m[name]; e != nil && e.alive {
		e.alive, e.lost, e.backoff, e.next = false, now, rejoinMin, now.Add(rejoinMin)
	}
}

// left forgets a member that left gracefully: it does not want to be
// called back.
func (t *rejoinTable) left(name string) { delete(t.m, name) }

// due returns the names and addresses to join now, and forgets those
// not alive for rejoinGiveUp (returned in gaveUp).
func (t *rejoinTable) due(now time.Time) (todo map[string]string, gaveUp []string) {
	for name, e := range t.m {
		switch {
		case e.alive || now.Before(e.next):
		case now.Sub(e.lost) >= rejoinGiveUp:
			delete(t.m, name)
			gaveUp = append(gaveUp, name)
		default:
			if todo == nil {
				todo = map[string]string{}
			}
			todo[name] = e.addr
		}
	}
	return todo, gaveUp
}

// tried records a join of name that did not bring it back: the next one
// waits twice as long, up to rejoinMax.
func (t *rejoinTable) tried(name string, now time.Time) {
	if e := t.m[name]; e != nil && !e.alive {
		e.next = now.Add(e.backoff)
		e.backoff = min(2*e.backoff, rejoinMax)
	}
}

// rejoin runs until m is closed, joining the members that went away.
func (m *Membership) rejoin() {
	t := time.NewTicker(rejoinTick)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.metaMu.Lock()
		leaving := m.leaving
		m.metaMu.Unlock()
		if leaving {
			continue
		}
		m.mu.Lock()
		todo, gaveUp := m.rejoins.due(time.Now())
		m.mu.Unlock()
		for _, name := range gaveUp {
			m.log.Info("stopped re-joining a member that has not answered", "member", name, "after", rejoinGiveUp)
		}
		for name, addr := range todo {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timing.TCPTimeout)
			n, err := m.Join(ctx, []string{addr})
			cancel()
			m.mu.Lock()
			_, back := m.info[name]
			if !back {
				m.rejoins.tried(name, time.Now())
			}
			m.mu.Unlock()
			switch {
			case back:
				m.log.Info("re-joined a member that had gone", "member", name, "gossip", addr)
			case err != nil || n == 0:
				m.log.Debug("re-join a member that has gone", "member", name, "gossip", addr, "err", err)
			}
		}
	}
}
