package discovery

import (
	"bytes"
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
//     learns the leave from them.
//
// A member that misses both (lost packets) finds the silence by probing
// and reports Dead, as it does for a crash.

// leaveNote is the user message of a member that leaves: the prefix and
// the member's name.
var leaveNote = []byte("p2pc-leave\x00")

// leaveNoteTTL is how long a note is kept: a noted member's later events
// (the leave message, a death found by probing) are its leave, not news.
const leaveNoteTTL = time.Minute

// leaveState follows this member's own leave message through gossip.
type leaveState struct {
	mu     sync.Mutex
	queued bool          // memberlist queued the leave message
	sends  int           // gossip packets built since
	want   int           // sends that make one round
	sent   chan struct{} // closed at want sends
}

// queuedSelf is told (from NotifyLeave of this node) that memberlist
// queued the leave message.
func (l *leaveState) queuedSelf() {
	l.mu.Lock()
	defer l.mu.Unlock()
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

// noteLeavers sends the leave note to every other member it knows.
func (m *Membership) noteLeavers() int {
	msg := append(bytes.Clone(leaveNote), m.cfg.Name...)
	type to struct{ name, addr string }
	var others []to
	m.mu.Lock()
	for name, in := range m.info {
		if name != m.cfg.Name {
			others = append(others, to{name, in.addr})
		}
	}
	m.mu.Unlock()
	sent := 0
	for _, o := range others {
		host, port, err := net.SplitHostPort(o.addr)
		ip := net.ParseIP(host)
		p, perr := strconv.Atoi(port)
		if err != nil || ip == nil || perr != nil {
			continue
		}
		if err := m.list.SendBestEffort(&memberlist.Node{Name: o.name, Addr: ip, Port: uint16(p)}, msg); err != nil {
			m.log.Debug("leave note", "member", o.name, "err", err)
			continue
		}
		sent++
	}
	return sent
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
	if m.leavers == nil {
		m.leavers = map[string]time.Time{}
	}
	now := time.Now()
	for n, t := range m.leavers {
		if now.Sub(t) > leaveNoteTTL {
			delete(m.leavers, n)
		}
	}
	if !live {
		m.mu.Unlock()
		return
	}
	m.leavers[string(name)] = now
	delete(m.info, string(name))
	m.rejoins.left(string(name))
	m.mu.Unlock()
	m.log.Info("member left", "member", string(name))
	m.emit(Event{Kind: Leave, Member: m.member(string(name), in.addr, in.meta, StateLeft, now)})
}

// leftByNote reports whether name sent a leave note lately (and forgets
// it when forget).
func (m *Membership) leftByNote(name string, forget bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.leavers[name]
	if forget {
		delete(m.leavers, name)
	}
	return ok && time.Since(t) <= leaveNoteTTL
}
