package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/mdns"
)

const (
	// MDNSService is the DNS-SD service type p2pc nodes announce and browse.
	MDNSService = "_p2pc._tcp"
	// mdnsDomain is the mDNS domain.
	mdnsDomain = "local"

	defaultQueryTimeout = time.Second
	defaultMDNSTTL      = 30 * time.Second
	// entriesBuffer is the room for answers between the library's query
	// loop (which drops an answer when the channel is full) and the
	// goroutine that reads them.
	entriesBuffer = 256
)

// ErrClosed is returned by operations on a closed MDNS or Membership.
var ErrClosed = errors.New("discovery: closed")

// Announcement is what a node tells the LAN about itself: the TXT record of
// its _p2pc._tcp service instance.
type Announcement struct {
	// Name is the node name (also its memberlist name). It becomes the
	// service instance name; characters outside [A-Za-z0-9_-] are replaced
	// there (the TXT record keeps the name as it is).
	Name string
	// GRPCAddr is host:port of the node's peer gRPC service; its port is
	// the SRV port. An unspecified host (0.0.0.0, ::, empty) is replaced by
	// the first announced IP.
	GRPCAddr string
	// GossipAddr is host:port of the node's memberlist, treated the same.
	GossipAddr string
	// Version is the peer protocol version the node speaks.
	Version int
}

// MDNSConfig configures an MDNS.
type MDNSConfig struct {
	// Self, if not nil, is announced until Close.
	Self *Announcement
	// Interface is the network interface to announce and browse on. nil
	// leaves the choice to the system's multicast route for 224.0.0.251:
	// on a LAN host the interface of the default route, in a test's
	// private network namespace loopback (224.0.0.0/4 dev lo).
	Interface *net.Interface
	// IPs are the addresses put in the A/AAAA records and used where an
	// announced address has no host. Default: Interface's addresses if
	// Interface is set; else the host of Self.GRPCAddr if it is a concrete
	// IP; else the source address the kernel picks for the mDNS group (no
	// packet is sent to find it); else the first IPv4 address of an
	// interface that is up and multicasts; else 127.0.0.1 (a test's
	// namespace, where the multicast route is on loopback).
	IPs []net.IP
	// QueryTimeout is how long one browse round listens for answers
	// (default 1 s). Answers are used as they arrive, but a round always
	// lasts this long, also after its context ends.
	QueryTimeout time.Duration
	// TTL is how long a browsed peer is remembered without being seen
	// again (default 30 s). Browse with a period well under TTL to keep
	// live peers listed.
	TTL time.Duration
	// IPv6 also queries over IPv6 (ff02::fb). Default: IPv4 only.
	IPv6 bool
	// Logger receives the library's log lines (component=mdns).
	Logger *slog.Logger
}

// MDNS announces this node as a _p2pc._tcp service and browses for the
// others. It is a Finder. Close stops the announcement and waits for the
// browse rounds in progress.
type MDNS struct {
	cfg    MDNSConfig
	log    *slog.Logger
	stdlog *log.Logger
	self   string // name of the announced node, excluded from results
	server *mdns.Server

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cache  map[string]cachedPeer // by peer name
}

type cachedPeer struct {
	peer Peer
	seen time.Time
}

// NewMDNS starts announcing cfg.Self (if set) and returns an MDNS ready to
// browse.
func NewMDNS(cfg MDNSConfig) (*MDNS, error) {
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = defaultQueryTimeout
	}
	if cfg.TTL <= 0 {
		cfg.TTL = defaultMDNSTTL
	}
	lg := orDiscard(cfg.Logger).With("component", "mdns")
	m := &MDNS{
		cfg:    cfg,
		log:    lg,
		stdlog: stdLogger(lg, nil),
		cache:  map[string]cachedPeer{},
	}
	if cfg.Self != nil {
		svc, err := m.service(*cfg.Self)
		if err != nil {
			return nil, fmt.Errorf("mdns announce: %w", err)
		}
		srv, err := mdns.NewServer(&mdns.Config{Zone: svc, Iface: cfg.Interface, Logger: m.stdlog})
		if err != nil {
			return nil, fmt.Errorf("mdns announce %q: %w", cfg.Self.Name, err)
		}
		m.server = srv
		m.self = cfg.Self.Name
		lg.Info("announcing", "instance", svc.Instance, "service", MDNSService,
			"grpc", txtValue(svc.TXT, "grpc"), "gossip", txtValue(svc.TXT, "gossip"), "ips", svc.IPs)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// service builds the DNS-SD records for a.
func (m *MDNS) service(a Announcement) (*mdns.MDNSService, error) {
	if a.Name == "" {
		return nil, errors.New("empty node name")
	}
	if len(a.Name) > 200 {
		return nil, fmt.Errorf("node name %.20q...: longer than 200 bytes", a.Name)
	}
	ips, err := m.announceIPs(a)
	if err != nil {
		return nil, err
	}
	grpc, err := fillHost(a.GRPCAddr, ips)
	if err != nil {
		return nil, fmt.Errorf("grpc address: %w", err)
	}
	_, portStr, _ := net.SplitHostPort(grpc)
	port, _ := strconv.Atoi(portStr)
	txt := []string{"name=" + a.Name, "grpc=" + grpc}
	if a.GossipAddr != "" {
		gossip, err := fillHost(a.GossipAddr, ips)
		if err != nil {
			return nil, fmt.Errorf("gossip address: %w", err)
		}
		txt = append(txt, "gossip="+gossip)
	}
	txt = append(txt, "v="+strconv.Itoa(a.Version))
	for _, s := range txt {
		if len(s) > 255 {
			return nil, fmt.Errorf("TXT string %.20q...: longer than 255 bytes", s)
		}
	}
	inst := instanceLabel(a.Name)
	host := inst + ".p2pc." + mdnsDomain + "."
	return mdns.NewMDNSService(inst, MDNSService, mdnsDomain+".", host, port, ips, txt)
}

// announceIPs picks the addresses to announce (see MDNSConfig.IPs).
func (m *MDNS) announceIPs(a Announcement) ([]net.IP, error) {
	if len(m.cfg.IPs) > 0 {
		return m.cfg.IPs, nil
	}
	if m.cfg.Interface != nil {
		addrs, err := m.cfg.Interface.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", m.cfg.Interface.Name, err)
		}
		var ips []net.IP
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				ips = append(ips, n.IP)
			}
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("interface %s has no usable address", m.cfg.Interface.Name)
		}
		slices.SortStableFunc(ips, func(x, y net.IP) int { // IPv4 first
			return boolInt(x.To4() == nil) - boolInt(y.To4() == nil)
		})
		return ips, nil
	}
	if host, _, err := net.SplitHostPort(a.GRPCAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			return []net.IP{ip}, nil
		}
	}
	// The source address of the route to the mDNS group (connecting a
	// UDP socket sends nothing), else the first address of an interface
	// that is up and multicasts, else loopback.
	if c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}); err == nil {
		ip := c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
		if !ip.IsUnspecified() {
			return []net.IP{ip}, nil
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces (set IPs or Interface): %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagMulticast == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && n.IP.To4() != nil {
				return []net.IP{n.IP}, nil
			}
		}
	}
	return []net.IP{net.IPv4(127, 0, 0, 1)}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fillHost validates host:port and replaces an unspecified host with the
// first of ips.
func fillHost(addr string, ips []net.IP) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q: port must be 1-65535", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = ips[0].String()
	}
	return net.JoinHostPort(host, port), nil
}

// instanceLabel makes a DNS label from a node name: characters outside
// [A-Za-z0-9_-] become '-', and a name that had to change gets a short
// hash of the original, so different names stay different labels.
func instanceLabel(name string) string {
	var b strings.Builder
	changed := false
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
			changed = true
		}
	}
	s := b.String()
	if len(s) > 50 {
		s, changed = s[:50], true
	}
	if changed {
		sum := sha256.Sum256([]byte(name))
		s += "-" + hex.EncodeToString(sum[:4])
	}
	return s
}

func txtValue(txt []string, key string) string {
	for _, f := range txt {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Find runs one browse round (QueryTimeout long) and returns every peer
// seen within TTL, this node excluded, sorted by name.
func (m *MDNS) Find(ctx context.Context) ([]Peer, error) {
	if err := m.round(ctx, nil); err != nil {
		return nil, err
	}
	return m.cached(), nil
}

// Browse runs a browse round every period until ctx ends or m is closed,
// and calls found, from one goroutine, for each peer that is new, has
// changed, or is back after being forgotten (TTL) - as its answer arrives.
// found must not block for long. A failed round is logged and retried.
// Browse returns nil when ctx ends or m is closed.
func (m *MDNS) Browse(ctx context.Context, every time.Duration, found func(Peer)) error {
	if every < m.cfg.QueryTimeout {
		every = m.cfg.QueryTimeout
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var lastErr string
	for {
		err := m.round(ctx, found)
		switch {
		case errors.Is(err, ErrClosed) || ctx.Err() != nil:
			return nil
		case err != nil && err.Error() != lastErr:
			m.log.Warn("browse round failed", "err", err)
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// round sends one query and takes the answers as they arrive, for
// QueryTimeout.
func (m *MDNS) round(ctx context.Context, found func(Peer)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()

	entries := make(chan *mdns.ServiceEntry, entriesBuffer)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for e := range entries {
			m.see(ctx, e, found)
		}
	}()
	err := mdns.QueryContext(ctx, &mdns.QueryParam{
		Service:     MDNSService,
		Domain:      mdnsDomain,
		Timeout:     m.cfg.QueryTimeout,
		Interface:   m.cfg.Interface,
		Entries:     entries,
		DisableIPv6: !m.cfg.IPv6,
		Logger:      m.stdlog,
	})
	close(entries) // the query loop, the only sender, has returned
	<-consumed
	if err != nil {
		return fmt.Errorf("mdns query %s: %w", MDNSService, err)
	}
	if m.ctx.Err() != nil {
		return ErrClosed
	}
	return ctx.Err()
}

// see caches one answer and reports it to found if it is news.
func (m *MDNS) see(ctx context.Context, e *mdns.ServiceEntry, found func(Peer)) {
	p, err := peerFromEntry(e)
	if err != nil {
		m.log.Debug("ignoring answer", "instance", e.Name, "err", err)
		return
	}
	if m.self != "" && p.Name == m.self {
		return
	}
	now := time.Now()
	m.mu.Lock()
	old, had := m.cache[p.Name]
	m.cache[p.Name] = cachedPeer{peer: p, seen: now}
	m.mu.Unlock()
	news := !had || old.peer != p || now.Sub(old.seen) > m.cfg.TTL
	if news {
		m.log.Debug("found peer", "name", p.Name, "grpc", p.Addr, "gossip", p.GossipAddr, "v", p.Version)
	}
	if news && found != nil && ctx.Err() == nil {
		found(p)
	}
}

// cached returns the unexpired peers, dropping the expired ones.
func (m *MDNS) cached() []Peer {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Peer, 0, len(m.cache))
	for name, c := range m.cache {
		if now.Sub(c.seen) > m.cfg.TTL {
			delete(m.cache, name)
			continue
		}
		out = append(out, c.peer)
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// peerFromEntry reads a service entry: TXT fields first, the SRV port and
// A/AAAA addresses where the TXT record has no address or no host.
func peerFromEntry(e *mdns.ServiceEntry) (Peer, error) {
	var ip net.IP
	switch {
	case e.AddrV4 != nil && !e.AddrV4.IsUnspecified():
		ip = e.AddrV4
	case e.AddrV6IPAddr != nil && !e.AddrV6IPAddr.IP.IsUnspecified():
		ip = e.AddrV6IPAddr.IP
	}
	p := Peer{Name: txtValue(e.InfoFields, "name")}
	if p.Name == "" {
		p.Name, _, _ = strings.Cut(e.Name, "."+MDNSService+".")
		p.Name = strings.ReplaceAll(p.Name, `\`, "")
	}
	if p.Name == "" {
		return Peer{}, errors.New("no name")
	}
	fix := func(addr string) (string, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", err
		}
		if h := net.ParseIP(host); host == "" || (h != nil && h.IsUnspecified()) {
			if ip == nil {
				return "", fmt.Errorf("%q has no host and the answer no address", addr)
			}
			host = ip.String()
		}
		return net.JoinHostPort(host, port), nil
	}
	var err error
	if g := txtValue(e.InfoFields, "grpc"); g != "" {
		if p.Addr, err = fix(g); err != nil {
			return Peer{}, fmt.Errorf("grpc: %w", err)
		}
	} else if ip != nil && e.Port != 0 {
		p.Addr = net.JoinHostPort(ip.String(), strconv.Itoa(e.Port))
	} else {
		return Peer{}, errors.New("no address")
	}
	if g := txtValue(e.InfoFields, "gossip"); g != "" {
		if p.GossipAddr, err = fix(g); err != nil {
			return Peer{}, fmt.Errorf("gossip: %w", err)
		}
	}
	if v := txtValue(e.InfoFields, "v"); v != "" {
		if p.Version, err = strconv.Atoi(v); err != nil {
			return Peer{}, fmt.Errorf("version %q: %w", v, err)
		}
	}
	return p, nil
}

// Close stops announcing and browsing, waits for the rounds in progress
// (at most QueryTimeout) and forgets the cache. It is idempotent.
func (m *MDNS) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	var err error
	if m.server != nil {
		if err = m.server.Shutdown(); err != nil {
			err = fmt.Errorf("mdns stop announcing: %w", err)
		}
		m.log.Info("stopped announcing", "name", m.self)
	}
	m.wg.Wait()
	m.mu.Lock()
	clear(m.cache)
	m.mu.Unlock()
	return err
}

var _ Finder = (*MDNS)(nil)
