package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrNameTaken is returned (wrapped) by Join and JoinFrom when another
// member of the cluster already uses this node's name. memberlist refuses
// the second node; it has to restart under another name.
var ErrNameTaken = errors.New("node name already in use")

// clusterLabel is put on every memberlist packet and stream: p2pc members
// ignore other memberlist clusters (Consul, Serf, ...) and are ignored by
// them.
const clusterLabel = "p2pc"

// eventBuffer is the capacity of the Events channel; when it is full the
// oldest event is dropped.
const eventBuffer = 1024

// Member states.
const (
	StateAlive   = "alive"
	StateSuspect = "suspect"
	StateDead    = "dead"
	StateLeft    = "left"
)

// Member is a node of the cluster as this node sees it.
type Member struct {
	Meta
	// GossipAddr is the member's memberlist address, host:port.
	GossipAddr string
	// State is StateAlive or StateSuspect in Members; StateDead or
	// StateLeft in Leave and Dead events.
	State string
	// LastSeen is when this node last heard from or about the member: its
	// join, a metadata update, or an answer to one of this node's probes.
	LastSeen time.Time
	// Compatible is false when the member speaks another peer protocol
	// (Meta.Proto) or its metadata cannot be read. Such members are
	// listed, but work must not be sent to them.
	Compatible bool
}

// EventKind says what happened to a member.
type EventKind int

const (
	// Join: a member appeared (or came back after dying).
	Join EventKind = iota
	// Update: a member's metadata changed (UpdateMeta).
	Update
	// Leave: a member left gracefully (Leave).
	Leave
	// Dead: a member stopped answering and was declared failed.
	Dead
)

func (k EventKind) String() string {
	switch k {
	case Join:
		return "join"
	case Update:
		return "update"
	case Leave:
		return "leave"
	case Dead:
		return "dead"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of another member; this node is never its subject.
type Event struct {
	Kind   EventKind
	Member Member
}

// Config configures Start.
type Config struct {
	// Name is the node name, unique in the cluster.
	Name string
	// QuietDeaths logs a member's death at Info rather than Warn: a
	// submitter reports the peers it lost with leases itself, and the
	// deaths of others are no news to its user.
	QuietDeaths bool
	// BindAddr is the address to listen on for gossip (UDP and TCP),
	// e.g. "127.0.0.1" or "0.0.0.0" (the default).
	BindAddr string
	// BindPort is the gossip port; 0 picks a free one (GossipAddr reports
	// it).
	BindPort int
	// AdvertiseAddr is the address other members should use, host or
	// host:port, if not the bound one (with BindAddr 0.0.0.0 memberlist
	// picks a private address of the machine). Its port is ignored when
	// BindPort is 0.
	AdvertiseAddr string
	// Meta returns this node's current metadata. It is called by Start
	// and UpdateMeta (never under memberlist's locks: the encoding served
	// to memberlist is the one they made). Name is always Config.Name; OS
	// and Arch default to runtime.GOOS and GOARCH. nil means just those.
	Meta func() Meta
	// Logger receives membership events and memberlist's own log lines
	// (component=memberlist).
	Logger *slog.Logger
	// Timing tunes failure detection; zero fields are LANTiming's.
	Timing Timing
	// SecretKey is the swarm's gossip key (32 bytes, required; see
	// trust.Secret.GossipKey): every UDP packet and TCP stream of gossip
	// is sealed with AES-256-GCM under it, and what does not open is
	// dropped. Nodes of other swarms cannot join, read or forge gossip.
	SecretKey []byte
}

// Membership is this node's view of the cluster, kept by memberlist
// (SWIM gossip with failure detection).
type Membership struct {
	cfg  Config
	log  *slog.Logger
	list *memberlist.Memberlist

	metaMu  sync.Mutex
	meta    []byte // the encoding memberlist serves
	proto   int    // this node's Meta.Proto
	leaving bool

	mu        sync.Mutex
	closed    bool
	selfAddr  string                 // gossip address, from memberlist's join of this node
	info      map[string]*memberInfo // live members by name, this node included
	conflicts map[string]time.Time   // address claiming our name -> when seen
	rejoins   rejoinTable            // other members' addresses, to join again when they go
	leavers   map[string]leaver      // members that sent a leave note
	dying     map[string]*dying      // members whose death is declared soon
	leave     leaveState
	warned    map[string]bool // one-time warnings already given
	foreign   map[string]int  // gossip that failed decryption, by source host
	events    chan Event
	dropped   int
	done      chan struct{}

	closing   atomic.Bool // from Close on, memberlist's log lines are dropped
	closeOnce sync.Once
	closeErr  error
}

// memberInfo is a copy of what memberlist told about a live member. The
// table is fed by memberlist's events (which run under its lock) because
// the nodes memberlist.Members returns are shared with, and written by,
// its goroutines.
type memberInfo struct {
	addr     string
	meta     []byte
	lastSeen time.Time
	suspect  bool
}

// Start creates the local member and starts gossiping; it contacts no one
// until Join or JoinFrom. ctx bounds the start only; Close stops.
func Start(ctx context.Context, cfg Config) (*Membership, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start membership: %w", err)
	}
	if cfg.Name == "" {
		return nil, errors.New("start membership: empty node name")
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "0.0.0.0"
	}
	if len(cfg.SecretKey) != 32 {
		return nil, fmt.Errorf("start membership: gossip key of %d bytes, want 32", len(cfg.SecretKey))
	}
	cfg.Timing = cfg.Timing.withDefaults()
	m := &Membership{
		cfg:       cfg,
		log:       orDiscard(cfg.Logger).With("component", "memberlist", "node", cfg.Name),
		info:      map[string]*memberInfo{},
		conflicts: map[string]time.Time{},
		warned:    map[string]bool{},
		foreign:   map[string]int{},
		events:    make(chan Event, eventBuffer),
		done:      make(chan struct{}),
	}
	if err := m.refreshMeta(); err != nil {
		return nil, fmt.Errorf("start membership: %w", err)
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertisePort = cfg.BindPort
	if cfg.AdvertiseAddr != "" {
		host, port, err := net.SplitHostPort(cfg.AdvertiseAddr)
		if err != nil {
			host, port = cfg.AdvertiseAddr, ""
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("start membership: advertise address %q: not an IP address", cfg.AdvertiseAddr)
		}
		mc.AdvertiseAddr = host
		if port != "" {
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("start membership: advertise address %q: bad port", cfg.AdvertiseAddr)
			}
			mc.AdvertisePort = p
		}
	}
	cfg.Timing.apply(mc)
	// Gossip messages are a few hundred bytes on a LAN: LZW costs more CPU
	// than the bytes it saves (it was a tenth of a busy peer's CPU).
	mc.EnableCompression = false
	mc.Label = clusterLabel
	// Encrypted and authenticated gossip: memberlist's keyring with the
	// swarm's one key; incoming and outgoing both verified (no plaintext
	// accepted or sent).
	keyring, err := memberlist.NewKeyring(nil, cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("start membership: %w", err)
	}
	mc.Keyring = keyring
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	d := &delegate{m: m}
	mc.Delegate, mc.Events, mc.Conflict, mc.Ping = d, d, d, d
	mc.Logger = stdLogger(m.log, m.libLog)

	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start membership %q on %s: %w", cfg.Name, net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	m.list = list
	go m.rejoin()
	m.log.Info("membership started", "gossip", m.GossipAddr(), "probe", cfg.Timing.ProbeInterval)
	return m, nil
}

// refreshMeta reads Meta and stores its encoding for memberlist.
func (m *Membership) refreshMeta() error {
	meta := Meta{}
	if m.cfg.Meta != nil {
		meta = m.cfg.Meta()
	}
	meta.Name = m.cfg.Name
	if meta.OS == "" {
		meta.OS = runtime.GOOS
	}
	if meta.Arch == "" {
		meta.Arch = runtime.GOARCH
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	b, err := encodeMeta(meta, m.leaving)
	if err != nil {
		return err
	}
	m.meta, m.proto = b, meta.Proto
	return nil
}

func (m *Membership) localProto() int {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.proto
}

// GossipAddr is the address other members reach this one at, host:port.
func (m *Membership) GossipAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.selfAddr
}

// Join contacts the members at gossipAddrs (host:port; use IP addresses: a
// host name is resolved through DNS) and merges state with each. It
// returns how many were reached; an error if none was, or if the cluster
// already has a member with this node's name (ErrNameTaken).
func (m *Membership) Join(ctx context.Context, gossipAddrs []string) (int, error) {
	if m.isClosed() {
		return 0, ErrClosed
	}
	start := time.Now()
	n := 0
	var errs []error
	for _, a := range gossipAddrs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		k, err := m.list.Join([]string{a})
		n += k
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
	}
	if addr := m.conflictSince(start); addr != "" {
		return n, fmt.Errorf("join: %w: %q is used by the member at %s", ErrNameTaken, m.cfg.Name, addr)
	}
	if n == 0 && len(errs) > 0 {
		return 0, fmt.Errorf("join: %w", errors.Join(errs...))
	}
	if n > 0 {
		m.log.Debug("joined", "contacted", n, "of", len(gossipAddrs))
	}
	return n, nil
}

func (m *Membership) conflictSince(t time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for addr, at := range m.conflicts {
		if !at.Before(t) {
			return addr
		}
	}
	return ""
}

// JoinFrom asks f for peers every period and joins the gossip addresses
// of those not yet members: mDNS finds the LAN, static --join addresses
// (Static with GossipAddr set) and gossip then end up in one cluster.
// Peers without a GossipAddr are ignored. It returns nil when ctx ends or
// m is closed, and an ErrNameTaken error if this node's name is taken.
func (m *Membership) JoinFrom(ctx context.Context, f Finder, every time.Duration) error {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	self := m.GossipAddr()
	var lastErr string
	for {
		peers, err := f.Find(ctx)
		if err != nil && ctx.Err() == nil && err.Error() != lastErr {
			m.log.Warn("waiting for peers: no answer; asking again every "+every.String(), "err", err)
			lastErr = err.Error()
		} else if err == nil {
			lastErr = ""
		}
		names, addrs := map[string]bool{}, map[string]bool{self: true}
		for _, mem := range m.Members() {
			names[mem.Name] = true
			addrs[mem.GossipAddr] = true
		}
		var todo []string
		var tried []Peer
		for _, p := range peers {
			switch {
			case p.GossipAddr == "" || addrs[p.GossipAddr]:
			case p.Name == m.cfg.Name:
				m.warnOnce("announce:"+p.GossipAddr, "another node announces this node's name",
					"name", p.Name, "gossip", p.GossipAddr)
			case names[p.Name]:
			default:
				todo = append(todo, p.GossipAddr)
				tried = append(tried, p)
				addrs[p.GossipAddr] = true
			}
		}
		if len(todo) > 0 && ctx.Err() == nil {
			n, err := m.Join(ctx, todo)
			switch {
			case errors.Is(err, ErrNameTaken):
				return err
			case errors.Is(err, ErrClosed):
				return nil
			case err != nil && n == 0:
				// A foreign swarm's announcement (its gossip does not
				// open with this swarm's key) or a peer not up yet.
				for _, a := range todo {
					m.warnOnce("join:"+a, "could not join an announced peer: of another swarm, or unreachable (logged once per address)", "gossip", a, "err", err)
				}
			case err != nil:
				m.log.Debug("join found peers", "addrs", todo, "err", err)
			default:
				m.log.Info("joined found peers", "addrs", todo, "contacted", n)
			}
			m.forgetUnjoined(f, tried)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.done:
			return nil
		case <-t.C:
		}
	}
}

// forgetUnjoined tells a finder that can forget (Resolver) about the
// peers that a join did not make members: their answers may be stale (a
// restarted peer gossips on another port), so it asks them again.
func (m *Membership) forgetUnjoined(f Finder, tried []Peer) {
	fg, ok := f.(interface{ Forget(Peer) })
	if !ok {
		return
	}
	m.mu.Lock()
	var gone []Peer
	for _, p := range tried {
		if _, in := m.info[p.Name]; !in || p.Name == "" {
			gone = append(gone, p)
		}
	}
	m.mu.Unlock()
	for _, p := range gone {
		fg.Forget(p)
	}
}

// Members returns the live members (alive and suspect), this node
// included, sorted by name.
func (m *Membership) Members() []Member {
	type row struct {
		name string
		in   memberInfo
	}
	m.mu.Lock()
	rows := make([]row, 0, len(m.info))
	for name, in := range m.info {
		rows = append(rows, row{name, *in})
	}
	m.mu.Unlock()
	now := time.Now()
	out := make([]Member, 0, len(rows))
	for _, r := range rows {
		state := StateAlive
		if r.in.suspect {
			state = StateSuspect
		}
		if r.name == m.cfg.Name {
			r.in.lastSeen = now
		}
		out = append(out, m.member(r.name, r.in.addr, r.in.meta, state, r.in.lastSeen))
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// member builds a Member, warning once about metadata that cannot be read
// or another protocol version.
func (m *Membership) member(name, addr string, rawMeta []byte, state string, lastSeen time.Time) Member {
	meta, _, err := decodeMeta(name, rawMeta)
	mem := Member{Meta: meta, GossipAddr: addr, State: state, LastSeen: lastSeen, Compatible: err == nil}
	if err != nil {
		m.warnOnce("meta:"+name, "member metadata unreadable; the member is listed as incompatible", "member", name, "err", err)
	} else if local := m.localProto(); meta.Proto != local {
		mem.Compatible = false
		if name != m.cfg.Name {
			m.warnOnce("proto:"+name+":"+strconv.Itoa(meta.Proto),
				"member speaks another peer protocol; it is listed but gets no work",
				"member", name, "proto", meta.Proto, "ours", local)
		}
	}
	return mem
}

func (m *Membership) warnOnce(key, msg string, args ...any) {
	m.mu.Lock()
	seen := m.warned[key]
	m.warned[key] = true
	m.mu.Unlock()
	if !seen {
		m.log.Warn(msg, args...)
	}
}

// Events returns the changes of the other members. The channel holds
// 1024 events; when it is full the oldest is dropped (and the drop
// logged), so a slow reader never stalls memberlist. It is closed by
// Close.
func (m *Membership) Events() <-chan Event { return m.events }

func (m *Membership) emit(e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for {
		select {
		case m.events <- e:
			return
		default:
		}
		select {
		case old := <-m.events:
			m.dropped++
			if m.dropped == 1 || m.dropped%100 == 0 {
				m.log.Warn("events channel full, dropping the oldest", "dropped", m.dropped, "kind", old.Kind, "member", old.Member.Name)
			}
		default:
		}
	}
}

// UpdateMeta re-reads Config.Meta and gossips it. It waits until the
// update has been sent (or ctx ends; without a deadline at most 5 s).
func (m *Membership) UpdateMeta(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	if err := m.refreshMeta(); err != nil {
		return fmt.Errorf("update metadata: %w", err)
	}
	if err := m.list.UpdateNode(timeoutOf(ctx, 5*time.Second)); err != nil {
		return fmt.Errorf("update metadata: %w", err)
	}
	return ctx.Err()
}

func timeoutOf(ctx context.Context, def time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return def
}

// Leave tells the cluster this node is leaving (see leave.go): a leave
// note straight to every member, then memberlist's leave message, waiting
// (at most timeout) only until gossip has carried it one round. The
// others report a Leave event; one that missed both the note and the
// message reports Dead. Close afterwards.
func (m *Membership) Leave(timeout time.Duration) error {
	if m.isClosed() {
		return ErrClosed
	}
	deadline := time.Now().Add(timeout)
	m.metaMu.Lock()
	m.leaving = true
	m.metaMu.Unlock()
	// The mark in the metadata is for push/pull exchanges and members of
	// older versions that learn of it on their own; nothing waits for it.
	if err := m.refreshMeta(); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	noted := m.noteLeavers()
	queued, sent := make(chan struct{}), make(chan struct{})
	m.leave.mu.Lock()
	m.leave.want = max(1, min(m.cfg.Timing.GossipNodes, noted))
	m.leave.queuedCh, m.leave.sent = queued, sent
	m.leave.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- m.list.Leave(max(time.Until(deadline), time.Millisecond)) }()
	// memberlist's Leave panics once Shutdown has run (Close): return only
	// after it has queued the leave message (a few locks) or returned.
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("leave: %w", err)
		}
		m.log.Info("left the cluster", "noted", noted)
		return nil
	case <-queued:
	}
	wait := sent
	if noted == 0 {
		// No one left to tell (all the others left too).
		wait = closedChan
	}
	// Gossip goes only to members memberlist holds alive: when the others
	// all left meanwhile, no one will carry the message.
	tick := time.NewTicker(m.cfg.Timing.GossipInterval)
	defer tick.Stop()
	timeoutC := time.After(max(time.Until(deadline), time.Millisecond))
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("leave: %w", err)
			}
		case <-wait:
		case <-tick.C:
			if m.list.NumMembers() > 1 {
				continue
			}
		case <-timeoutC:
			return fmt.Errorf("leave: the leave message was not sent within %v", timeout)
		}
		m.log.Info("left the cluster", "noted", noted)
		return nil
	}
}

func (m *Membership) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Close stops gossiping without a leave message (the others detect a
// death; call Leave first to leave gracefully), closes the Events channel
// and ends JoinFrom. memberlist's last timers end within one probe
// interval. Close is idempotent.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		m.closing.Store(true)
		m.mu.Lock()
		m.closed = true
		close(m.events)
		close(m.done)
		m.mu.Unlock()
		if err := m.list.Shutdown(); err != nil {
			m.closeErr = fmt.Errorf("close membership: %w", err)
		}
		m.log.Info("membership closed")
	})
	return m.closeErr
}

// libLog sees memberlist's log lines: the only place memberlist tells
// that this node suspects a member. From Close on it drops them all
// (memberlist's goroutines report their closed sockets as errors while
// they wind down).
func (m *Membership) libLog(level slog.Level, msg string) bool {
	if m.closing.Load() {
		return false
	}
	if src, ok := undecryptable(msg); ok && level >= slog.LevelWarn {
		m.mu.Lock()
		m.foreign[src]++
		n := m.foreign[src]
		m.mu.Unlock()
		if n == 1 {
			m.log.Warn("ignoring gossip from a node of another swarm (it does not open with this swarm's key); said once per source, counted at debug level", "source", src, "err", msg)
		} else {
			m.log.Debug("gossip of another swarm ignored", "source", src, "count", n)
		}
		return false
	}
	if rest, ok := strings.CutPrefix(msg, "Suspect "); ok {
		if name, ok := strings.CutSuffix(rest, " has failed, no acks received"); ok {
			m.mu.Lock()
			if in := m.info[name]; in != nil {
				in.suspect = true
			}
			m.mu.Unlock()
		}
	}
	return true
}

// undecryptable returns the source host of a memberlist line that says
// gossip failed decryption (a node of another swarm: "failed to receive:
// no installed keys could decrypt the message from=HOST:PORT", or
// "Decrypt packet failed: ... from=HOST:PORT"). The host alone: a TCP
// stream comes from a new port each time.
func undecryptable(msg string) (string, bool) {
	lower := strings.ToLower(msg)
	if !strings.Contains(lower, "could decrypt") && !strings.Contains(lower, "decrypt packet failed") {
		return "", false
	}
	i := strings.LastIndex(msg, "from=")
	if i < 0 {
		return "unknown", true
	}
	src := strings.Fields(msg[i+len("from="):] + " ")[0]
	if host, _, err := net.SplitHostPort(src); err == nil {
		src = host
	}
	return src, true
}

// record copies what memberlist tells about a live member and returns
// the Member; called from memberlist's events, under its lock.
func (m *Membership) record(n *memberlist.Node) Member {
	addr, meta, now := n.Address(), slices.Clone(n.Meta), time.Now()
	m.mu.Lock()
	if n.Name == m.cfg.Name {
		m.selfAddr = addr
	} else {
		m.rejoins.seen(n.Name, addr)
	}
	m.info[n.Name] = &memberInfo{addr: addr, meta: meta, lastSeen: now}
	m.mu.Unlock()
	return m.member(n.Name, addr, meta, StateAlive, now)
}

// delegate is what memberlist calls. Its event methods run under
// memberlist's node lock: they must not call into memberlist.
type delegate struct{ m *Membership }

// NodeMeta serves the encoding made by Start, UpdateMeta or Leave.
func (d *delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	if len(d.m.meta) > limit { // cannot happen: encodeMeta checks
		return nil
	}
	return slices.Clone(d.m.meta)
}

// NotifyMsg receives the other members' user messages: leave notes.
func (d *delegate) NotifyMsg(b []byte) { d.m.noted(b) }

// GetBroadcasts has nothing to add; memberlist calls it for every packet
// that carries its own broadcasts, which is how Leave sees its leave
// message go out.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	d.m.leave.packet()
	return nil
}
func (d *delegate) LocalState(join bool) []byte            { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

func (d *delegate) NotifyJoin(n *memberlist.Node) {
	d.m.leftByNote(n.Name, true) // back after leaving
	d.m.cancelDead(n.Name)       // back before its death was declared
	mem := d.m.record(n)
	if n.Name == d.m.cfg.Name {
		return
	}
	d.m.log.Info("member joined", "member", n.Name, "gossip", mem.GossipAddr, "grpc", mem.GRPCAddr, "compatible", mem.Compatible)
	d.m.emit(Event{Kind: Join, Member: mem})
}

func (d *delegate) NotifyUpdate(n *memberlist.Node) {
	if d.m.leftByNote(n.Name, false) {
		return // it left; an update sent before is stale
	}
	mem := d.m.record(n)
	if n.Name == d.m.cfg.Name {
		return
	}
	if _, leaving, err := decodeMeta(n.Name, n.Meta); err == nil && leaving {
		return // the Leave event follows
	}
	d.m.log.Debug("member updated", "member", n.Name, "free", mem.FreeSlots, "slots", mem.Slots)
	d.m.emit(Event{Kind: Update, Member: mem})
}

func (d *delegate) NotifyLeave(n *memberlist.Node) {
	if n.Name == d.m.cfg.Name {
		d.m.leave.queuedSelf() // Leave: memberlist queued the leave message
		return
	}
	if d.m.leftByNote(n.Name, false) {
		return // its note was its Leave
	}
	_, leaving, _ := decodeMeta(n.Name, n.Meta)
	addr, meta, now := n.Address(), slices.Clone(n.Meta), time.Now()
	d.m.mu.Lock()
	delete(d.m.info, n.Name)
	if !leaving {
		// A death is declared deadGrace later: a leave note queued behind
		// the leave message may still turn it into a Leave (leave.go).
		d.m.deferDeadLocked(n.Name, addr, meta)
		d.m.mu.Unlock()
		return
	}
	d.m.rejoins.left(n.Name)
	d.m.mu.Unlock()
	d.m.log.Info("member left", "member", n.Name)
	d.m.emit(Event{Kind: Leave, Member: d.m.member(n.Name, addr, meta, StateLeft, now)})
}

func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != d.m.cfg.Name {
		d.m.warnOnce("conflict:"+other.Address(), "two members claim one name",
			"name", existing.Name, "known", existing.Address(), "other", other.Address())
		return
	}
	addr := other.Address()
	d.m.mu.Lock()
	_, seen := d.m.conflicts[addr]
	d.m.conflicts[addr] = time.Now()
	d.m.mu.Unlock()
	if !seen {
		d.m.log.Error("another member uses this node's name; memberlist refuses one of them: restart it under another name",
			"name", existing.Name, "other", addr)
	}
}

func (d *delegate) AckPayload() []byte { return nil }

func (d *delegate) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	if in := d.m.info[other.Name]; in != nil {
		in.lastSeen = time.Now()
		in.suspect = false
	}
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
	_ memberlist.PingDelegate     = (*delegate)(nil)
)
