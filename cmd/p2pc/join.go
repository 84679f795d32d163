package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/webui"
)

// JoinCmd is `p2pc join`: run a volunteer node until SIGINT/SIGTERM.
type JoinCmd struct {
	Slots         int           `help:"Tasks run at once (default: number of CPUs)." placeholder:"N"`
	Name          string        `help:"Node name, unique in the swarm (default: hostname-pid)." env:"P2PC_NAME"`
	Listen        string        `help:"gRPC listen address, host:port (default ${default}: all interfaces, port 7070; port 0 picks a free one). A --join address without a port means port 7070." default:"0.0.0.0:7070" placeholder:"ADDR"`
	Advertise     string        `help:"Address (host or host:port) peers should dial, if not the one detected." placeholder:"ADDR"`
	Join          []string      `help:"Static peers to join (host or host:port; port 7070 when none is given), for routed networks and tests." sep:"," placeholder:"ADDR"`
	NoMDNS        bool          `name:"no-mdns" env:"P2PC_NO_MDNS" help:"Do not announce or browse with mDNS."`
	ShutdownGrace time.Duration `help:"On SIGINT/SIGTERM, how long running tasks may finish before they are stopped." default:"10s"`
	GPUs          string        `name:"gpus" help:"NVIDIA GPUs offered as GPU slots, one device each, for jobs whose resources ask for a GPU: a number (the first N), all, or off (default ${default}: the owner opts in)." default:"off" placeholder:"N|all|off"`
	AllowNetwork  bool          `name:"allow-network" help:"Take jobs whose tasks ask for the network (spec sandbox.network); without it tasks have none and such jobs are refused."`
	Submitters    []string      `help:"Run jobs only for these submitters' node IDs (default: every member of the swarm)." sep:"," placeholder:"ID"`
	UI            string        `name:"ui" help:"Serve the live web view of this peer and the swarm on ADDR (bare --ui: 127.0.0.1:7481). Off loopback it needs the token in the URL printed." placeholder:"ADDR"`
	VolunteerFlags
	Invite         string        `help:"Join an invite-only swarm with the one-time line from 'p2pc swarm invite' (the creator issues this node's identity and gives the swarm secret; later starts need no flag)." env:"P2PC_INVITE" placeholder:"INVITATION"`
	AdmitListen    string        `name:"admit-listen" help:"On the creator of an invite-only swarm: where newcomers redeem their invitations (host:port)." default:"0.0.0.0:7071" placeholder:"ADDR"`
	RevocationPoll time.Duration `name:"revocation-poll" hidden:"" default:"30s" help:"Invite-only swarm: how often the revocation list is refreshed."`
	NoOwn          bool          `name:"no-own" help:"Never own a job handed to the swarm (p2pc run --detach): run tasks and hold copies only."`
	Retain         time.Duration `help:"How long this member keeps the jobs handed to the swarm once they ended (their output folders), and copies of jobs whose end it never heard of." default:"168h" placeholder:"DURATION"`
	CopyLostAfter  time.Duration `name:"copy-lost-after" hidden:"" default:"2m" help:"A member holding a copy of an ended job's output that is not a live member for this long has lost it; a copy is made again elsewhere."`
	TaskUser       string        `name:"task-user" env:"P2PC_TASK_USER" help:"When run as root: the account tasks run as (default: p2pc-task if it exists, else nobody; never root). Not root: tasks run as you." placeholder:"USER"`

	joinFaults // hidden --fault-* flags, only in builds with the p2pcfault tag
}

// Run serves until the context ends.
func (c *JoinCmd) Run(g *Globals) error {
	slots := c.Slots
	if slots <= 0 {
		slots = runtime.NumCPU()
	}
	static, err := discovery.ParseAddrs(c.Join)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--join: %w", err))
	}
	submitters, err := parseSubmitters(c.Submitters)
	if err != nil {
		return err
	}
	vol, err := c.volunteer()
	if err != nil {
		return withCode(exitBadInput, err)
	}
	gpus, err := joinGPUs(g.Ctx, c.GPUs, g.Logger)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	taskUser, err := sandbox.TaskUser(c.TaskUser)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--task-user: %w", err))
	}
	if c.Invite != "" {
		if err := redeemInvite(g, c.Invite, c.Name); err != nil {
			return err
		}
	}
	creds, err := g.creds()
	if err != nil {
		return err
	}
	if s, ok, _ := g.secret(); ok && g.Swarm != "" {
		if err := g.rememberSwarm(s); err != nil {
			g.Logger.Warn("could not keep the swarm secret for next time", "err", err)
		}
	}
	adv := c.Advertise
	if adv == "" && len(static) > 0 && listensEverywhere(c.Listen) {
		adv = transport.LocalIPFor(static[0].Addr)
	}
	n, err := node.New(node.Config{
		Name:          c.Name,
		Slots:         slots,
		DataDir:       g.Data,
		Listen:        c.Listen,
		Advertise:     adv,
		Version:       version,
		Creds:         creds,
		Submitters:    submitters,
		ShutdownGrace: c.ShutdownGrace,
		JobLinger:     30 * time.Second, // a rerun of the job finds its plugin processes warm
		KeepResults:   c.KeepResults,
		AllowNetwork:  c.AllowNetwork,
		Volunteer:     vol,
		GPUs:          gpus,
		TaskUser:      taskUser,
		Logger:        g.Logger,
		Lie:           c.lie(),
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return withCode(exitBadInput, fmt.Errorf("%w (another p2pc join on this machine? give it --listen HOST:PORT, port 0 picks a free one)", err))
	}
	if err != nil {
		return withCode(exitBadInput, err)
	}
	c.announce(g.Logger)
	var presence *node.Presence
	jobs, err := jobsService(g, n, &presence, static.Addrs(), c.NoOwn, c.Retain, jobsKeep{Disk: vol.Disk, LostAfter: c.CopyLostAfter})
	if err != nil {
		return err
	}
	if err := serveInvites(g.Ctx, g, creds, n, c.AdmitListen, c.RevocationPoll); err != nil {
		return err
	}
	presence, err = n.StartPresence(g.Ctx, node.PresenceConfig{MDNS: !c.NoMDNS, Join: static.Addrs()})
	if err != nil {
		return withCode(exitBadInput, err)
	}
	if err := jobs.Start(g.Ctx); err != nil {
		return withCode(exitLocalDisk, err)
	}
	defer jobs.Wait()
	if c.UI != "" {
		stopUI, err := startUI(g.Ctx, g, c.UI, webui.DefaultJoinAddr, webui.Config{
			Title: "peer " + n.Name(), Swarm: &nodePeers{n: n, presence: presence, conf: n.ConfinementLine()}, Served: nodeServed{n}})
		if err != nil {
			return err
		}
		defer stopUI()
	}
	// The first line on stdout says where the node listens (scripts and
	// tests read it).
	fmt.Fprintf(os.Stdout, "listening %s name %s slots %d id %s swarm %s\n", n.Addr(), n.Name(), slots, n.ID(), creds.SwarmID())
	// Which confinements this machine gives tasks (on stderr: stdout's
	// first line is for scripts).
	sandboxOffWarning()
	fmt.Fprintln(os.Stderr, confinementLine(n, c.AllowNetwork, vol))
	for i, d := range gpus.Devices {
		fmt.Fprintf(os.Stderr, "GPU slot %d: %s (%s)\n", i, d, d.Path)
	}
	return n.Serve(g.Ctx)
}

// listensEverywhere reports whether listen (host:port, scheme allowed)
// binds all interfaces, so the address to advertise has to be guessed;
// a listener bound to one IP advertises that IP.
func listensEverywhere(listen string) bool {
	_, rest := transport.Split(listen)
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		host = rest
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}
