package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/gpu"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/trust"
)

// Config configures a node.
type Config struct {
	// Name must be unique in the swarm (default: hostname-pid).
	Name string
	// Slots is how many tasks run at once (0: the node takes no work).
	Slots int
	// DataDir holds the block store, plugins and job folders.
	DataDir string
	// EphemeralStore: DataDir is thrown away with the node (a `p2pc run`'s
	// own folder, removed when the run ends and swept when it died), so
	// its block store fsyncs no block (blocks.DiskOptions.Ephemeral).
	EphemeralStore bool
	// Listen is the gRPC listen address (default 127.0.0.1:0), an
	// address of Transports ("host:port" is tcp).
	Listen string
	// Advertise is the address (host or host:port) peers dial (default:
	// the bound address; an unspecified IP is replaced by the first
	// non-loopback address, or 127.0.0.1 when there is none).
	Advertise string
	// Transports serve the node's listen address and the addresses it
	// dials (nil: transport.Default()).
	Transports *transport.Registry
	// Version is the software version reported to peers.
	Version string
	// Creds are the node's swarm credentials (required): every
	// connection it serves or dials is mutual TLS with them, its gossip
	// is encrypted with the swarm's key.
	Creds *trust.Creds
	// Submitters, if not empty, are the only node IDs whose jobs the node
	// runs (besides being members of the swarm).
	Submitters []trust.NodeID
	// Blocks tunes the block server (fault injection for tests only).
	Blocks transfer.ServerOptions
	// Lie makes the node return wrong outputs: fault injection for tests
	// of answer verification only (a hidden, loudly logged join flag;
	// empty without the p2pcfault build tag).
	Lie Lie
	// AllowNetwork lets tasks of jobs that ask for the network (spec
	// sandbox.network) use it; without it such jobs are refused.
	AllowNetwork bool
	// Volunteer are the owner's caps on tasks (volunteer.go).
	Volunteer Volunteer
	// GPUs are the devices the node offers (p2pc join --gpus), each as a
	// GPU slot beside the Slots: only tasks of jobs whose resources ask
	// for a GPU run there, each bound to its slot's device (offer.go).
	GPUs gpu.Inventory
	// TaskUser is the account tasks run as (sandbox.TaskUser: set when
	// the node runs as root); nil: the node's own.
	TaskUser *sandbox.User
	// ShutdownGrace is how long running tasks may finish on shutdown
	// (default 10s).
	ShutdownGrace time.Duration
	// JobLinger keeps a job's warm plugin processes and folders this
	// long after its last session ends, for a rerun of the same job
	// (same job ID: still one job per process); 0 closes them at once.
	JobLinger time.Duration
	// KeepResults is how long the node keeps the finished results of a
	// job whose coordinator went away (its session broke), to hand them
	// over when a session of the same job starts again (keep.go); its
	// running tasks of that job finish meanwhile. 0: results of a broken
	// session are dropped and its running tasks stopped.
	KeepResults time.Duration
	Logger      *slog.Logger
}

// Node is a running p2pc peer.
type Node struct {
	cfg   Config
	log   *slog.Logger
	store *blocks.DiskStore
	conns *transfer.Pool
	lis   net.Listener
	addr  string
	grpc  *grpc.Server
	sched *sched
	// keep holds results for coordinators that went away (keep.go).
	keep *keeper
	// fence is the highest ownership epoch seen per job (fence.go).
	fence epochFence
	// life ends when the node stops serving: tasks of broken sessions,
	// which no stream's context ends, stop then.
	life    context.Context
	endLife context.CancelFunc

	// Work folders (workdir.go): slotMade[i], the folder slot i made
	// last ("" if none), is touched by slot i's runner only.
	workOnce sync.Once
	workDir  string
	workLock *dirlock.Dir // holds workDir
	workErr  error
	slotMade []string

	mu     sync.Mutex
	pools  map[poolKey]*pluginhost.Pool
	jobs   map[string]*jobFiles // per job ID (workdir.go)
	jobSeq uint64               // names jobs' work folders
	// confinement is ConfinementLine(), gossiped in the metadata.
	confinement string
	stats       Stats
	// served are the jobs this node serves and served lately (served.go).
	served map[servedKey]*ServedJob

	gossipAddr func() string
	// stopHooks run after running tasks finished (or the grace period
	// ended), before the gRPC server stops: leaving the membership.
	stopHooks []func()
}

// Stats count what a node did.
type Stats struct {
	Sessions int `json:"sessions"`
	Refused  int `json:"refused"`
	Leases   int `json:"leases"`
	// Done counts the attempts that ended here with a result.
	Done   int `json:"done"`
	Handed int `json:"handed_back"`
	// Offered: results of lost sessions offered to a job's next session.
	Offered int `json:"handed_over"`
}

// MaxMsgSize bounds every gRPC message a node accepts or sends.
const MaxMsgSize = blocks.MaxBlockSize + 1<<20

// New opens the node's store and listener. Call Serve to run it.
func New(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("node: slots must be >= 0, got %d", cfg.Slots)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: no data directory")
	}
	if cfg.Creds == nil {
		return nil, errors.New("node: no swarm credentials")
	}
	log := cfg.Logger.With("component", "node", "node", cfg.Name, "id", cfg.Creds.ID().String())
	storeOpts := cfg.Volunteer.storeOptions(cfg.Logger)
	storeOpts.Ephemeral = cfg.EphemeralStore
	store, err := blocks.OpenDisk(filepath.Join(cfg.DataDir, "store"), storeOpts)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.Transports == nil {
		cfg.Transports = transport.Default()
	}
	tr, listenAddr, err := cfg.Transports.Lookup(cfg.Listen)
	var lis net.Listener
	if err == nil {
		lis, err = tr.Listen(context.Background(), listenAddr)
	}
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("node: listen %s: %w", cfg.Listen, err)
	}
	n := &Node{
		cfg:   cfg,
		log:   log,
		store: store,
		// Keepalive pings find a peer that stopped answering (SIGSTOP, a
		// dead host) even while its TCP stays up. gRPC pings no more often than every 10 s (its minimum): a dead
		// connection is noticed after about 12 s. The membership (about 2 s)
		// is what takes a stopped or cut-off peer's leases back; this is
		// the backstop.
		conns:    transfer.NewPool(cfg.Transports, cfg.Creds.ClientTLS(), grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second})),
		lis:      lis,
		sched:    newSched(cfg.Slots, len(cfg.GPUs.Devices)),
		slotMade: make([]string, cfg.Slots+len(cfg.GPUs.Devices)),
		pools:    map[poolKey]*pluginhost.Pool{},
		jobs:     map[string]*jobFiles{},
		keep:     newKeeper(cfg.KeepResults),
	}
	n.life, n.endLife = context.WithCancel(context.Background())
	n.addr = advertise(cfg.Advertise, lis)
	n.grpc = grpc.NewServer(append(transfer.GRPCServerOptions(cfg.Creds.ServerTLS(), cfg.Logger),
		grpc.MaxRecvMsgSize(MaxMsgSize),
		grpc.MaxSendMsgSize(MaxMsgSize),
		// An idle connection (no stream for 5 minutes) is closed; its client
		// dials again when it needs to.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, MaxConnectionIdle: 5 * time.Minute}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 500 * time.Millisecond, PermitWithoutStream: true}),
	)...)
	blockSrv := transfer.NewServer(store, cfg.Blocks)
	blockSrv.Register(n.grpc)
	// Block bytes move on the bulk path (TLS on the same port, see
	// package transfer) when both ends speak it and the transport has
	// the capability; gRPC connections pass.
	n.lis = blockSrv.Listener(lis, tr, cfg.Creds.ServerTLS())
	peerpb.RegisterPeerServer(n.grpc, &peerService{n: n})
	n.confinement = n.ConfinementLine()
	return n, nil
}

// advertise returns the canonical address peers dial: adv, completed
// with the bound port, or the bound address of l.
func advertise(adv string, l net.Listener) string {
	bound, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		if adv != "" {
			return transport.Canonical(adv)
		}
		return transport.AddrOf(l)
	}
	adv = transport.Canonical(adv)
	if adv != "" {
		if _, port, err := net.SplitHostPort(adv); err == nil && port != "" {
			return adv
		}
		return net.JoinHostPort(adv, fmt.Sprint(bound.Port))
	}
	ip := bound.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if in, ok := a.(*net.IPNet); ok && !in.IP.IsLoopback() && in.IP.To4() != nil {
					ip = in.IP
					break
				}
			}
		}
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(bound.Port))
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// ID is the node's ID, from its key.
func (n *Node) ID() trust.NodeID { return n.cfg.Creds.ID() }

// Addr is the gRPC address peers dial.
func (n *Node) Addr() string { return n.addr }

// Store is the node's block store.
func (n *Node) Store() *blocks.DiskStore { return n.store }

// Conns is the node's pool of gRPC connections to peers.
func (n *Node) Conns() *transfer.Pool { return n.conns }

// Slots is the configured slot count.
func (n *Node) Slots() int { return n.cfg.Slots }

// allSlots counts the CPU and the GPU slots.
func (n *Node) allSlots() int { return n.cfg.Slots + len(n.cfg.GPUs.Devices) }

// Load returns running leases, free slots and work sessions.
func (n *Node) Load() (busy, free, jobs int) {
	busy, free = n.sched.load()
	return busy, free, n.sched.jobs()
}

// SetGossipAddr tells the node how to report its gossip address in Info.
func (n *Node) SetGossipAddr(f func() string) { n.gossipAddr = f }

// Stats returns a copy of the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Serve runs the node until ctx ends, then shuts down gracefully: no new
// work, unstarted leases handed back, running tasks given ShutdownGrace to
// finish, plugin processes stopped, the store closed.
func (n *Node) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	schedCtx, stopSched := context.WithCancel(context.Background())
	n.sched.run(schedCtx, &wg)
	if err := n.applyVolunteer(); err != nil {
		n.log.Warn("volunteer caps not applied", "err", err)
	}
	wg.Go(func() { n.watchBusy(schedCtx) })
	serveErr := make(chan error, 1)
	go func() { serveErr <- n.grpc.Serve(n.lis) }()
	n.log.Info("node serving", "addr", n.addr, "swarm", n.cfg.Creds.SwarmID(), "slots", n.cfg.Slots, "gpus", len(n.cfg.GPUs.Devices), "os", runtime.GOOS, "arch", runtime.GOARCH)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	t0 := time.Now()
	n.shutdown()
	n.endLife()
	for _, h := range n.stopHooks {
		h()
	}
	tLeft := time.Now()
	stopSched()
	stopped := make(chan struct{})
	go func() { n.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		n.grpc.Stop()
	}
	tServed := time.Now()
	wg.Wait()
	defer func() {
		n.log.Debug("node stopped", "left", tLeft.Sub(t0), "grpc", tServed.Sub(tLeft), "rest", time.Since(tServed))
	}()
	n.mu.Lock()
	pools := n.pools
	n.pools = map[poolKey]*pluginhost.Pool{}
	n.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
	n.conns.Close()
	n.removeWork()
	if cerr := n.store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// shutdown hands back unstarted leases and waits (up to the grace period)
// for running ones.
func (n *Node) shutdown() {
	handed := n.sched.drain()
	for sess, items := range handed {
		for _, it := range items {
			sess.handBack(it, "peer "+n.cfg.Name+" is shutting down")
		}
	}
	grace := time.NewTimer(n.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-n.sched.idle():
		return
	case <-grace.C:
	}
	n.log.Warn("shutdown grace over, stopping running tasks")
}

// poolKey names a warm pool: one per job, plugin network right and memory
// limit. A
// process is confined once, when it starts, to its job's inputs and work
// folders, and serves that job only: nothing of one submitter's job
// reaches another's through a process's memory or files.
type poolKey struct {
	job     string
	digest  [32]byte
	network bool
	memory  int64
	gpu     int // the GPU slot's device (offer.go), -1 for the CPU slots
}

// pool returns the warm plugin pool of job j for a plugin digest whose
// tasks may use the network or not, for the CPU slots (gpu < 0) or for
// the GPU slot of device gpu: its processes are bound to that device
// before they start (taskrun.PreStart).
func (n *Node) pool(j *jobFiles, digest [32]byte, path string, network bool, memory int64, gpu int) *pluginhost.Pool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := poolKey{j.id, digest, network, memory, gpu}
	p, ok := n.pools[k]
	if !ok {
		pol := n.taskPolicy(j)
		pol.Network = network
		cfg := pluginhost.Config{Path: path, Checksum: digest, Logger: n.cfg.Logger, Sandbox: pol, Limits: n.taskLimits(memory)}
		size := max(n.cfg.Slots, 1)
		if gpu >= 0 {
			cfg, size = taskrun.PreStart(cfg, n.gpuBinding(gpu)), 1
		}
		p = pluginhost.NewPool(cfg, size)
		n.pools[k] = p
	}
	return p
}

// Confinement says how this peer confines tasks (package sandbox).
func (n *Node) Confinement() sandbox.Status { return sandbox.Probe().WithUser(n.cfg.TaskUser) }

// ConfinementLine is Confinement with the cgroups this machine gives
// each plugin process and which limits apply (cgroup, or rlimits where
// there is none): what p2pc join prints and the peer gossips.
func (n *Node) ConfinementLine() string {
	return fmt.Sprintf("%s cgroup=%s limits=%s", n.Confinement(), sandbox.Cgroups(), sandbox.TaskLimits())
}

// taskPolicy is what a task of job j on this peer may touch (package
// sandbox): its job's inputs, read-only, and its job's work folders. Not
// other jobs' inputs or work folders, not the block store, nor anything
// else of the data folder (see jobFiles).
func (n *Node) taskPolicy(j *jobFiles) sandbox.Policy {
	return sandbox.Policy{ReadOnly: []string{j.dir}, ReadWrite: []string{j.work}, User: n.cfg.TaskUser}
}

// ProtocolVersion is the peer protocol version this node speaks.
const ProtocolVersion = peerpb.ProtocolVersion
