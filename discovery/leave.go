package discovery

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Leaving quickly. memberlist's Leave queues a leave message (a "dead"
// message about oneself) and waits until gossip has sent it
// RetransmitMult x log10(N+1) times: three gossip rounds and more, about
// 0.3 s with 16 members on LANTiming, which a `p2pc run` whose results are
// already on disk made its user wait for, twice (the leaving mark went
// the same way first). Now a member that leaves
//
//  1. sends a leave note straight to every member it knows (one small
//     sealed UDP packet each, through memberlist's user messages), so that
//     each of them reports a Leave at once and never a death, and
//  2. queues memberlist's leave message and waits only until gossip has
//     carried it to GossipNodes members (one gossip round, at most
//     GossipInterval), who spread it on; a member that missed the note
//     learns the leave from them. With no one left to tell (every other
//     member left too, as when a whole machine stops), it does not wait.
//
// A member that misses both (lost packets) finds the silence by probing
// and reports Dead, as it does for a crash.

// leaveNote is the user message of a member that leaves: the prefix and
// the member's name.
var leaveNote = []byte("p2pc-leave\x00")

// deadGrace is how long a member's death waits to be declared. memberlist
// hands user messages and leave messages to its handler last in, first
// out: a leave note that arrived with the leave message is read just
// after it, and turns the death into a Leave.
const deadGrace = 250 * time.Millisecond

// dying is a member whose death is declared at the timer.
type dying struct {
	timer     *time.Timer
	addr      string
	meta      []byte
	announced time.Time
}

// deferDeadLocked declares name dead deadGrace from now (m.mu held).
func (m *Membership) deferDeadLocked(name, addr string, meta []byte) {
	if m.dying == nil {
		m.dying = map[string]*dying{}
	}
	if old := m.dying[name]; old != nil {
		old.timer.Stop()
	}
	dy := &dying{addr: addr, meta: meta, announced: time.Now()}
	dy.timer = time.AfterFunc(deadGrace, func() { m.declareDead(name, dy) })
	m.dying[name] = dy
}

// declareDead reports the death of name unless a note or its return came
// first.
func (m *Membership) declareDead(name string, dy *dying) {
	m.mu.Lock()
	if m.dying[name] != dy {
		m.mu.Unlock()
		return
	}
	delete(m.dying, name)
	m.rejoins.dead(name, dy.announced)
	m.mu.Unlock()
	mem := m.member(name, dy.addr, dy.meta, StateDead, dy.announced)
	level := slog.LevelWarn
	if m.cfg.QuietDeaths {
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "member failed", "member", name, "gossip", mem.GossipAddr)
	m.emit(Event{Kind: Dead, Member: mem})
}

// cancelDead forgets a death not yet declared (the member is back).
func (m *Membership) cancelDead(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if dy := m.dying[name]; dy != nil {
		dy.timer.Stop()
		delete(m.dying, name)
	}
}

// leaveNoteTTL is how long a note is kept: a noted member's later events
// (the leave message, a death found by probing) are its leave, not news.
const leaveNoteTTL = time.Minute

// closedChan is a closed channel: a wait that is over.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// leaveState follows this member's own leave message through gossip.
type leaveState struct {
	mu       sync.Mutex
	queued   bool          // memberlist queued the leave message
	queuedCh chan struct{} // closed then
	sends    int           // gossip packets built since
	want     int           // sends that make one round
	sent     chan struct{} // closed at want sends
}

// queuedSelf is told (from NotifyLeave of this node) that memberlist
// queued the leave message.
func (l *leaveState) queuedSelf() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.queued && l.queuedCh != nil {
		close(l.queuedCh)
	}
	l.queued = true
}

// packet is told that memberlist built a gossip packet: once the leave
// message is queued, it is in every packet until sent enough times.
func (l *leaveState) packet() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.queued || l.sent == nil {
		return
	}
	l.sends++
	if l.sends == l.want {
		close(l.sent)
	}
}

// noteLeavers sends the leave note to every other member it knows: the
// live ones and those that noted their own leave lately (they may still
// be leaving, and would take this member's leave message for a death).
func (m *Membership) noteLeavers() int {
	msg := append(bytes.Clone(leaveNote), m.cfg.Name...)
	others := map[string]string{}
	m.mu.Lock()
	for name, in := range m.info {
		if name != m.cfg.Name {
			others[name] = in.addr
		}
	}
	for name, l := range m.leavers {
		if time.Since(l.at) <= leaveNoteTTL {
			others[name] = l.addr
		}
	}
	m.mu.Unlock()
	sent := 0
	for name, addr := range others {
		host, port, err := net.SplitHostPort(addr)
		ip := net.ParseIP(host)
		p, perr := strconv.Atoi(port)
		if err != nil || ip == nil || perr != nil {
			continue
		}
		if err := m.list.SendBestEffort(&memberlist.Node{Name: name, Addr: ip, Port: uint16(p)}, msg); err != nil {
			m.log.Debug("leave note", "member", name, "err", err)
			continue
		}
		sent++
	}
	return sent
}

// leaver is a member that noted its leave.
type leaver struct {
	at   time.Time
	addr string
}

// noted handles a leave note from another member: it is gone from this
// node's view at once (a Leave event), and its leave message or the
// silence that follows is not news.
func (m *Membership) noted(msg []byte) {
	name, ok := bytes.CutPrefix(msg, leaveNote)
	if !ok || len(name) == 0 || string(name) == m.cfg.Name {
		return
	}
	m.mu.Lock()
	in, live := m.info[string(name)]
	var addr string
	var meta []byte
	switch dy := m.dying[string(name)]; {
	case live:
		addr, meta = in.addr, in.meta
		delete(m.info, string(name))
	case dy != nil: // its leave message came first
		dy.timer.Stop()
		delete(m.dying, string(name))
		addr, meta = dy.addr, dy.meta
	default: // gone already, or never known
		m.mu.Unlock()
		return
	}
	if m.leavers == nil {
		m.leavers = map[string]leaver{}
	}
	now := time.Now()
	for n, l := range m.leavers {
		if now.Sub(l.at) > leaveNoteTTL {
			delete(m.leavers, n)
		}
	}
	m.leavers[string(name)] = leaver{at: now, addr: addr}
	m.rejoins.left(string(name))
	m.mu.Unlock()
	m.log.Info("member left", "member", string(name))
	m.emit(Event{Kind: Leave, Member: m.member(string(name), addr, meta, StateLeft, now)})
}

// leftByNote reports whether name sent a leave note lately (and forgets
// it when forget).
func (m *Membership) leftByNote(name string, forget bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leavers[name]
	if forget {
		delete(m.leavers, name)
	}
	return ok && time.Since(l.at) <= leaveNoteTTL
}
