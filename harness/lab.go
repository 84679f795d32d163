package harness

// A lab is a small LAN of real p2pc processes on this one machine, built
// from network namespaces and CPU quotas, for benchmarks and end-to-end
// tests that must not touch the machine's own network:
//
//	lab, err := harness.NewLab(ctx, harness.LabConfig{
//		Bin:   bin, // from harness.Build
//		Peers: []harness.PeerSpec{{Name: "fast", CPU: 0.9}, {Name: "slow", CPU: 0.6}},
//		Mode:  harness.Bridge,
//	})
//	if err != nil { ... }
//	defer lab.Close()
//	sub, err := lab.Submit(ctx, harness.SubmitOptions{Spec: "job.yaml", Out: dir})
//
// Bridge mode gives every peer a namespace of its own, joined to a hub
// namespace's bridge by a veth pair, with an address in 10.213.0.0/16 and
// the multicast route through its eth0, so mDNS works as on a LAN; a peer
// may have its uplink capped with tc tbf. The submitter (`p2pc run`) has
// a namespace of its own on the same bridge. Loopback mode puts every
// process in one namespace on 127.0.0.1 (multicast routed through lo): the
// fallback where bridges cannot be made.
//
// Every lab object is named LabPrefix + "<owner pid>-<lab number>-...".
// Close (also run when the context given to NewLab ends) stops every
// process and removes every namespace, veth pair and cgroup; NewLab
// removes what crashed runs left behind.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// Mode is how a lab wires its processes together.
type Mode int

const (
	// Bridge: a namespace per process, all on one bridge (a LAN).
	Bridge Mode = iota
	// Loopback: one namespace, every process on 127.0.0.1.
	Loopback
)

func (m Mode) String() string {
	switch m {
	case Bridge:
		return "bridge"
	case Loopback:
		return "loopback"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode reads "bridge" or "loopback".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "bridge":
		return Bridge, nil
	case "loopback":
		return Loopback, nil
	}
	return 0, fmt.Errorf("lab mode %q: want bridge or loopback", s)
}

// PeerSpec describes one volunteer of a lab.
type PeerSpec struct {
	// Name is the peer's node name (default peer1, peer2, ...).
	Name string
	// Slots is how many tasks it runs at once (default: ceil(CPU), or 1).
	Slots int
	// CPU is its capacity in cores of CPU quota (0: no quota). The quota
	// covers the p2pc process and the plugin processes it starts.
	CPU float64
	// GOMAXPROCS for its p2pc process (default: ceil(CPU) when CPU > 0).
	GOMAXPROCS int
	// CPUs pins it (and its plugin processes) to these CPUs, a taskset
	// list like "0" or "0-1" ("": any CPU).
	CPUs string
	// Rate caps what it sends (tc tbf rate, like "100mbit"; Bridge only).
	Rate string
	// Args are extra `p2pc join` flags.
	Args []string
	// NoFile caps its open files (RLIMIT_NOFILE, soft and hard; 0: the
	// inherited limit).
	NoFile int
	// DiskBytes puts its data folder on a tmpfs of this size, mounted in
	// a mount namespace of its own (0: the lab's folder). A small one
	// fills up: the full-disk faults of the chaos suite.
	DiskBytes int64
}

// LabConfig configures NewLab.
type LabConfig struct {
	// Bin is the p2pc binary (see Build).
	Bin   string
	Peers []PeerSpec
	Mode  Mode
	// Dir holds the peers' and the submitter's data folders (default: a
	// temporary folder removed by Close).
	Dir string
	// MDNS lets the peers announce themselves and the submitter browse
	// with mDNS, inside the lab. Without it every process runs with
	// --no-mdns and the submitter is given the peers' addresses (--join).
	MDNS bool
	// Env is added to every p2pc process's environment.
	Env []string
	// StartTimeout bounds the wait for each peer to listen (default 30s).
	StartTimeout time.Duration
	// Priority runs every process of the lab (peers, submitter, commands)
	// in a cgroup of the highest CPU weight, so that other work on a shared
	// machine disturbs a measurement less. Quotas still cap the peers.
	Priority bool
	// JoinFirst starts the first peer alone and every other peer with
	// --join <the first peer's address> once it listens, so that the peers
	// form one membership without mDNS, as static seeds do on a routed
	// network (also after RestartPeers).
	JoinFirst bool
	// StopGrace is how long Close lets a peer shut down after SIGTERM
	// before it kills the peer's process group (default 5s).
	StopGrace time.Duration
	Logger    *slog.Logger
}

// LabPeer is a running peer of a lab.
type LabPeer struct {
	Spec  PeerSpec
	Name  string
	Addr  string // gRPC address, as the peer printed it
	IP    string
	Netns string
	Data  string
	Proc  *Proc
	cg    string // cgroup child name ("" if no quota)
	link  string // the hub end of its veth pair (Bridge)
	port  string // its gRPC port once it listened: a restart keeps it
}

// Lab is a running lab. Its methods are safe for concurrent use.
type Lab struct {
	cfg    LabConfig
	log    *slog.Logger
	name   string
	net    *netOps
	cg     *cpuCgroups
	subNS  string
	subIP  string
	peers  []*LabPeer
	ownDir bool
	// started is when the peers' processes were last started (NewLab,
	// RestartPeers), after the network was built.
	started time.Time

	stopAfter func() bool
	closeOnce sync.Once
	closeErr  error

	procMu    sync.Mutex
	procs     []*Proc  // every process the lab started, in order
	mounts    []*Mount // tmpfs holders, ended by Close
	leftovers []string // what still ran in the lab's namespaces at Close
}

var (
	labSeq    atomic.Int64
	staleOnce sync.Once
)

var listenLineRe = regexp.MustCompile(`listening (\S+) name (\S+)`)

// NewLab builds the lab's network, starts a `p2pc join` per peer in its
// namespace (under its CPU quota) and waits until every peer listens. When
// ctx ends the lab is closed. Call Close when done, also on error paths
// (it is idempotent).
func NewLab(ctx context.Context, cfg LabConfig) (*Lab, error) {
	if err := LabAvailable(); err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	if cfg.Bin == "" {
		return nil, errors.New("new lab: no p2pc binary")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if err := normalisePeers(&cfg); err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	staleOnce.Do(func() {
		removed, err := CleanStaleLabs()
		if len(removed) > 0 {
			cfg.Logger.Info("removed what crashed labs left behind", "component", "lab", "removed", strings.Join(removed, ", "))
		}
		if err != nil {
			cfg.Logger.Warn("clean stale labs", "component", "lab", "err", err)
		}
	})
	ops, err := newNetOps()
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	name, err := LabName(strconv.FormatInt(labSeq.Add(1), 10))
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	// One swarm per lab, like a user's: every process it starts gets the
	// token (P2PC_SWARM), as if the join line had been pasted.
	token, err := NewSwarmToken()
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	cfg.Env = append(slices.Clip(cfg.Env), "P2PC_SWARM="+token)
	l := &Lab{
		cfg:  cfg,
		name: name,
		net:  ops,
	}
	l.log = cfg.Logger.With("component", "lab", "lab", l.name)
	if l.cfg.Dir == "" {
		if l.cfg.Dir, err = os.MkdirTemp("", l.name+"-"); err != nil {
			return nil, fmt.Errorf("new lab: %w", err)
		}
		l.ownDir = true
	}
	l.stopAfter = context.AfterFunc(ctx, func() { _ = l.Close() })
	if err := os.Mkdir(l.tmpDir(), 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("new lab: %w", err), l.Close())
	}
	if err := l.build(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("new lab: %w", err), l.Close())
	}
	return l, nil
}

func normalisePeers(cfg *LabConfig) error {
	seen := map[string]bool{}
	for i := range cfg.Peers {
		p := &cfg.Peers[i]
		if p.Name == "" {
			p.Name = fmt.Sprintf("peer%d", i+1)
		}
		if seen[p.Name] {
			return fmt.Errorf("peer name %q used twice", p.Name)
		}
		seen[p.Name] = true
		if p.CPU < 0 || math.IsNaN(p.CPU) || math.IsInf(p.CPU, 0) {
			return fmt.Errorf("peer %s: cpu %v must be >= 0", p.Name, p.CPU)
		}
		if p.CPU > 0 && p.CPU*float64(QuotaPeriod.Microseconds()) < 1000 {
			return fmt.Errorf("peer %s: cpu %v is below the kernel's minimum quota (0.1 cores at a 10 ms period)", p.Name, p.CPU)
		}
		if p.Slots <= 0 {
			p.Slots = max(1, int(math.Ceil(p.CPU)))
		}
		if p.GOMAXPROCS <= 0 && p.CPU > 0 {
			p.GOMAXPROCS = max(1, int(math.Ceil(p.CPU)))
		}
		if p.Rate != "" && cfg.Mode != Bridge {
			return fmt.Errorf("peer %s: a rate cap needs Bridge mode (Loopback shares one interface)", p.Name)
		}
	}
	return nil
}

// build makes the network and the cgroups and starts the peers.
func (l *Lab) build(ctx context.Context) error {
	var throttled bool
	for _, p := range l.cfg.Peers {
		throttled = throttled || p.CPU > 0
	}
	if throttled || l.cfg.Priority {
		ctl, err := FindCPUController()
		if err != nil {
			return err
		}
		if l.cg, err = newCPUCgroups(ctl, l.name); err != nil {
			return err
		}
		if l.cfg.Priority {
			if err := l.cg.prioritise(); err != nil {
				return err
			}
		}
		l.log.Debug("cpu quotas", "controller", ctl.String(), "priority", l.cfg.Priority)
	}
	switch l.cfg.Mode {
	case Loopback:
		l.subNS, l.subIP = l.name, "127.0.0.1"
		if err := l.net.addNetns(ctx, l.subNS); err != nil {
			return err
		}
		if err := l.net.loopbackMulticast(ctx, l.subNS); err != nil {
			return err
		}
	case Bridge:
		// Big labs outgrow the kernel's shared ARP table.
		if changed, err := raiseNeighbourLimits(len(l.cfg.Peers)); err != nil {
			return err
		} else if changed != "" {
			l.log.Info("raised the ARP table's limits for a big lab", "peers", len(l.cfg.Peers), "changed", changed)
		}
		hub := l.name + "-hub"
		if err := l.net.addNetns(ctx, hub); err != nil {
			return err
		}
		if err := l.net.addBridge(ctx, hub); err != nil {
			return err
		}
		l.subNS, l.subIP = l.name+"-sub", submitterIP
		if err := l.net.addNetns(ctx, l.subNS); err != nil {
			return err
		}
		if err := l.net.attach(ctx, hub, "vsub", l.subNS, l.subIP); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown lab mode %d", l.cfg.Mode)
	}

	for i, spec := range l.cfg.Peers {
		p := &LabPeer{Spec: spec, Name: spec.Name, Data: filepath.Join(l.cfg.Dir, "peers", spec.Name)}
		switch l.cfg.Mode {
		case Loopback:
			p.Netns, p.IP = l.subNS, "127.0.0.1"
		case Bridge:
			p.Netns, p.IP = fmt.Sprintf("%s-p%d", l.name, i+1), peerIP(i)
			if err := l.net.addNetns(ctx, p.Netns); err != nil {
				return err
			}
			p.link = fmt.Sprintf("v%d", i+1)
			if err := l.net.attach(ctx, l.name+"-hub", p.link, p.Netns, p.IP); err != nil {
				return err
			}
			if spec.Rate != "" {
				if err := l.net.rateLimit(ctx, p.Netns, spec.Rate); err != nil {
					return fmt.Errorf("peer %s: %w", p.Name, err)
				}
			}
		}
		l.peers = append(l.peers, p)
	}
	if err := l.startPeers(ctx); err != nil {
		return err
	}
	l.log.Info("lab up", "mode", l.cfg.Mode.String(), "peers", len(l.peers))
	return nil
}

// startPeers starts every peer (JoinFirst: the first one first) and
// waits until each listens.
func (l *Lab) startPeers(ctx context.Context) error {
	l.procMu.Lock()
	l.started = time.Now()
	l.procMu.Unlock()
	rest := l.peers
	if l.cfg.JoinFirst && len(l.peers) > 1 {
		first := l.peers[0]
		if err := l.startPeer(first, nil); err != nil {
			return err
		}
		if err := l.waitListening(ctx, l.peers[:1]); err != nil {
			return err
		}
		rest = l.peers[1:]
		for _, p := range rest {
			if err := l.startPeer(p, []string{"--join", first.Addr}); err != nil {
				return err
			}
		}
		return l.waitListening(ctx, rest)
	}
	for _, p := range rest {
		if err := l.startPeer(p, nil); err != nil {
			return err
		}
	}
	return l.waitListening(ctx, rest)
}

// Started is when the peers' processes were last started (NewLab,
// RestartPeers), after the lab's network was built.
func (l *Lab) Started() time.Time {
	l.procMu.Lock()
	defer l.procMu.Unlock()
	return l.started
}

// waitListening waits until every peer of peers printed its address.
func (l *Lab) waitListening(ctx context.Context, peers []*LabPeer) error {
	wctx, cancel := context.WithTimeout(ctx, l.cfg.StartTimeout)
	defer cancel()
	for _, p := range peers {
		m, err := p.Proc.WaitOutput(wctx, listenLineRe)
		if err != nil {
			return fmt.Errorf("peer %s: %w", p.Name, err)
		}
		p.Addr = m[1]
		if _, port, err := net.SplitHostPort(p.Addr); err == nil {
			p.port = port
		}
	}
	return nil
}

// RestartPeers stops every peer and starts it again in the same
// namespace, cgroup and data folder (its plugins stay cached; its plugin
// processes do not stay warm). Restarted peers know nothing of each other
// until a submitter introduces them again. Their addresses change: read
// them again with Peers or PeerAddrs. Not safe while a job runs.
func (l *Lab) RestartPeers(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range l.peers {
		if p.Proc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Proc.Stop(l.cfg.StopGrace)
		}()
	}
	wg.Wait()
	for _, p := range l.peers {
		if err := p.Proc.CheckLogs(); err != nil {
			return fmt.Errorf("restart peers: %w", err)
		}
		p.Proc, p.Addr, p.port = nil, "", ""
	}
	if err := l.startPeers(ctx); err != nil {
		return fmt.Errorf("restart peers: %w", err)
	}
	return nil
}

// startPeer starts peer p's process with extra `p2pc join` flags.
func (l *Lab) startPeer(p *LabPeer, extra []string) error {
	s := p.Spec
	port := p.port
	if port == "" {
		port = "0"
	}
	args := []string{l.cfg.Bin, "--data", p.Data, "join", "--name", p.Name,
		"--slots", strconv.Itoa(s.Slots), "--listen", net.JoinHostPort(p.IP, port)}
	if !l.cfg.MDNS {
		args = append(args, "--no-mdns")
	}
	args = append(append(args, s.Args...), extra...)
	if s.NoFile > 0 {
		args = append([]string{"/bin/sh", "-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(s.NoFile)}, args...)
	}
	argv := l.net.netnsCommandArgs(p.Netns, args...)
	if s.DiskBytes > 0 {
		m, err := l.Tmpfs(p.Data, s.DiskBytes)
		if err != nil {
			return fmt.Errorf("peer %s: %w", p.Name, err)
		}
		argv = m.Wrap(argv)
	}
	if s.CPUs != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			return fmt.Errorf("peer %s: pinning to CPUs %s needs taskset (Debian package util-linux): %w", p.Name, s.CPUs, err)
		}
		argv = append([]string{taskset, "-c", s.CPUs}, argv...)
	}
	env := append([]string{"TMPDIR=" + l.tmpDir()}, l.cfg.Env...)
	if s.GOMAXPROCS > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(s.GOMAXPROCS))
	}
	if l.cg != nil {
		procs, err := l.cg.add(p.Name, s.CPU)
		if err != nil {
			return err
		}
		if s.CPU > 0 {
			p.cg = p.Name
		}
		// Join the cgroup before becoming p2pc, so that every thread
		// and every plugin process it starts is under the quota.
		argv = inCgroup(procs, argv)
	}
	proc, err := l.start(argv, Options{Name: p.Name, Env: env, Dir: l.cfg.Dir})
	if err != nil {
		return err
	}
	p.Proc = proc
	return nil
}

// start starts a process of the lab and remembers it (Procs).
func (l *Lab) start(argv []string, o Options) (*Proc, error) {
	p, err := Start(argv[0], argv[1:], o)
	if err != nil {
		return nil, err
	}
	l.procMu.Lock()
	l.procs = append(l.procs, p)
	l.procMu.Unlock()
	return p, nil
}

// inCgroup prefixes argv with a shell that moves itself into the cgroup
// whose cgroup.procs file is procs, then becomes argv.
func inCgroup(procs string, argv []string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, procs}, argv...)
}

// joinCgroup wraps argv into the lab's child cgroup name (no quota), if
// the lab has cgroups.
func (l *Lab) joinCgroup(name string, argv []string) ([]string, error) {
	if l.cg == nil {
		return argv, nil
	}
	procs, err := l.cg.add(name, 0)
	if err != nil {
		return nil, err
	}
	return inCgroup(procs, argv), nil
}

// tmpDir is the TMPDIR of the lab's processes: /tmp/<lab name>, short
// (plugins listen on unix sockets there, whose paths must stay under 108
// bytes), made by NewLab, removed by Close, and by a later lab if the
// owner crashed.
func (l *Lab) tmpDir() string { return filepath.Join(os.TempDir(), l.name) }

// Name is the lab's name (the prefix of its namespaces and cgroups).
func (l *Lab) Name() string { return l.name }

// Mode is the lab's mode.
func (l *Lab) Mode() Mode { return l.cfg.Mode }

// Dir is the folder holding the data folders.
func (l *Lab) Dir() string { return l.cfg.Dir }

// Peers returns the running peers, in the order of LabConfig.Peers.
func (l *Lab) Peers() []*LabPeer { return l.peers }

// PeerAddrs returns the peers' gRPC addresses.
func (l *Lab) PeerAddrs() []string {
	out := make([]string, len(l.peers))
	for i, p := range l.peers {
		out[i] = p.Addr
	}
	return out
}

// Throttled reports, per throttled peer, how many CFS periods its cgroup
// was throttled in and for how long in total: proof that a quota bites.
func (l *Lab) Throttled() map[string]time.Duration {
	out := map[string]time.Duration{}
	if l.cg == nil {
		return out
	}
	for _, p := range l.peers {
		if p.cg != "" {
			_, d := l.cg.throttled(p.cg)
			out[p.Name] = d
		}
	}
	return out
}

// Command returns a command that runs args inside the submitter's
// namespace (for comparators and tools that must see the lab's network),
// and in the lab's cgroup if it has one (without a quota).
func (l *Lab) Command(ctx context.Context, args ...string) (*exec.Cmd, error) {
	argv, err := l.joinCgroup("commands", l.net.netnsCommandArgs(l.subNS, args...))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = sysProcAttr(true)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	return cmd, nil
}

// SubmitOptions configure Submit.
type SubmitOptions struct {
	// Spec is the job spec; Out the output folder (must not hold another
	// job's results).
	Spec, Out string
	// Data is the submitter's --data folder (default: <lab dir>/submit);
	// share one between labs to build each plugin once.
	Data string
	// Args are extra `p2pc run` flags, after the defaults (--local-slots
	// 0: only the peers run tasks; --no-progress; the peers' addresses).
	Args []string
	// Join are the peers' addresses given to the submitter (default: every
	// peer's). Peers of a lab without mDNS do not know each other until a
	// submitter introduces them, so a job joined to one peer runs on that
	// peer alone.
	Join []string
	// Env is added to the process's environment.
	Env []string
	// SampleCPU, if > 0, samples the run process's CPU time this often.
	SampleCPU time.Duration
	// Timeout bounds the run (default 30 minutes).
	Timeout time.Duration
	// Mount, if set, runs the submitter in that tmpfs's mount namespace
	// (see Lab.Tmpfs): put Out or Data on it to fill its disk. The report
	// is read through Mount.Path.
	Mount *Mount
}

// Submission is what one `p2pc run` in the lab did.
type Submission struct {
	Report   *report.Report
	ExitCode int
	// Started is when the process was started; Wall how long it ran.
	Started time.Time
	Wall    time.Duration
	// CPU holds the process's CPU samples (SubmitOptions.SampleCPU).
	CPU    []CPUSample
	Stderr string
	Pid    int
}

// Submit runs `p2pc run` for a job inside the lab and waits for it. The
// error is set when the process could not run, did not exit 0, or left no
// report; the Submission is returned whenever the process ran.
func (l *Lab) Submit(ctx context.Context, o SubmitOptions) (*Submission, error) {
	r, err := l.StartSubmit(o)
	if err != nil {
		return nil, err
	}
	return r.Wait(ctx)
}

// Running is a `p2pc run` started by StartSubmit.
type Running struct {
	Proc *Proc
	o    SubmitOptions
	sub  *Submission
	// stopSampling ends the CPU sampling; sampled is closed when it has.
	stopSampling context.CancelFunc
	sampled      chan struct{}
}

// StartSubmit starts `p2pc run` for a job inside the lab and returns at
// once; Wait waits for it. Faults can be injected meanwhile.
func (l *Lab) StartSubmit(o SubmitOptions) (*Running, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Data == "" {
		o.Data = filepath.Join(l.cfg.Dir, "submit")
	}
	args := []string{l.cfg.Bin, "--data", o.Data, "run", o.Spec, "--out", o.Out,
		"--local-slots", "0", "--no-progress", "--listen", l.subIP + ":0"}
	if len(o.Join) == 0 {
		o.Join = l.PeerAddrs()
	}
	if !l.cfg.MDNS {
		args = append(args, "--no-mdns", "--join", strings.Join(o.Join, ","))
	}
	args = append(args, o.Args...)
	argv, err := l.joinCgroup("submitter", l.net.netnsCommandArgs(l.subNS, args...))
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", o.Spec, err)
	}
	if o.Mount != nil {
		argv = o.Mount.Wrap(argv)
	}
	env := append(append([]string{"TMPDIR=" + l.tmpDir()}, l.cfg.Env...), o.Env...)
	started := time.Now()
	proc, err := l.start(argv, Options{Name: "p2pc run", Env: env, Dir: l.cfg.Dir})
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", o.Spec, err)
	}
	r := &Running{Proc: proc, o: o, sub: &Submission{Started: started, Pid: proc.Pid()}, sampled: make(chan struct{})}
	var sctx context.Context
	sctx, r.stopSampling = context.WithCancel(context.Background())
	go func() {
		defer close(r.sampled)
		if o.SampleCPU > 0 {
			r.sub.CPU = SampleCPU(sctx, proc.Pid(), o.SampleCPU)
		}
	}()
	return r, nil
}

// Wait waits for the run to end (SubmitOptions.Timeout; when ctx ends or
// the time is up the run is stopped with SIGTERM, then killed) and reads
// its report. The error is set when the process could not run to its
// end, did not exit 0, or left no report; the Submission is returned
// whenever the process ran. Call it once.
func (r *Running) Wait(ctx context.Context) (*Submission, error) {
	o, proc, sub := r.o, r.Proc, r.sub
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	var waitErr error
	select {
	case <-proc.Done():
	case <-ctx.Done():
		proc.Stop(10 * time.Second) // SIGTERM: the run writes an interrupted report
		waitErr = ctx.Err()
	case <-timer.C:
		proc.Stop(10 * time.Second)
		waitErr = fmt.Errorf("did not finish within %s", o.Timeout)
	}
	sub.Wall = time.Since(sub.Started)
	r.stopSampling()
	<-r.sampled
	<-proc.Done()
	sub.ExitCode = exitCode(proc.waitErr)
	sub.Stderr = proc.Stderr()
	if err := proc.CheckLogs(); err != nil && waitErr == nil {
		waitErr = err
	}
	outDir := o.Out
	if o.Mount != nil {
		outDir = o.Mount.Path(o.Out)
	}
	rep, rerr := ReadReport(outDir)
	if rerr == nil {
		sub.Report = rep
	}
	switch {
	case waitErr != nil:
		return sub, fmt.Errorf("submit %s: %w\nstderr:\n%s", o.Spec, waitErr, tail(sub.Stderr, 2000))
	case sub.ExitCode != 0:
		return sub, fmt.Errorf("submit %s: p2pc run exited %d\nstderr:\n%s", o.Spec, sub.ExitCode, tail(sub.Stderr, 2000))
	case rerr != nil:
		return sub, fmt.Errorf("submit %s: %w", o.Spec, rerr)
	}
	return sub, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// CheckLogs reports a panic, a data race or a fatal error in any peer's
// output.
func (l *Lab) CheckLogs() error {
	var errs []error
	for _, p := range l.peers {
		if p.Proc != nil {
			if err := p.Proc.CheckLogs(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Close stops every peer (SIGTERM, then SIGKILL to its process group after
// StopGrace), kills whatever is left in the lab's cgroups and namespaces,
// removes them, and removes the data folder if the lab made it. It is
// idempotent and safe to call from several goroutines; all wait for the
// first call to finish.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		if l.stopAfter != nil {
			l.stopAfter()
		}
		var wg sync.WaitGroup
		for _, p := range l.peers {
			if p.Proc == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Proc.Stop(l.cfg.StopGrace)
			}()
		}
		wg.Wait()
		l.procMu.Lock()
		procs, mounts := slices.Clone(l.procs), l.mounts
		l.procMu.Unlock()
		for _, p := range procs { // submitters still running
			select {
			case <-p.Done():
			default:
				p.Stop(l.cfg.StopGrace)
			}
		}
		l.leftovers = l.net.waitEmpty(2 * time.Second)
		for _, m := range mounts {
			m.close()
		}
		var errs []error
		if l.cg != nil {
			if err := l.cg.remove(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := l.net.remove(); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(filepath.Join(os.TempDir(), l.name)); err != nil {
			errs = append(errs, err)
		}
		if l.ownDir {
			if err := os.RemoveAll(l.cfg.Dir); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeErr = errors.Join(errs...)
		if l.closeErr != nil {
			l.log.Warn("lab cleanup", "err", l.closeErr)
		} else {
			l.log.Debug("lab removed")
		}
	})
	return l.closeErr
}
