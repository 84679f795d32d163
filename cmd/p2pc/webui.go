package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/webui"
)

// uiDefault is what a bare --ui becomes: the command's default address.
const uiDefault = "default"

// expandUIFlag lets --ui take its address optionally: a bare "--ui" (not
// followed by a host:port) becomes "--ui=default".
func expandUIFlag(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--ui" {
			if i+1 < len(args) {
				if _, _, err := net.SplitHostPort(args[i+1]); err == nil {
					out = append(out, a)
					continue
				}
			}
			a = "--ui=" + uiDefault
		}
		out = append(out, a)
	}
	return out
}

// uiTokens are the tokens that open the web view: the UI token derived
// from the swarm secret (`p2pc swarm show` prints it); without a swarm, a
// random token for this process. The swarm token itself is not one: the
// view is plain HTTP, and the secret must never cross the network.
func uiTokens(g *Globals) ([]string, error) {
	s, ok, err := g.secret()
	if err != nil {
		return nil, err
	}
	if ok {
		return []string{s.UIToken()}, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("web view token: %w", err)
	}
	return []string{"p2pcui-" + hex.EncodeToString(b[:])}, nil
}

// startUI serves the web view on addr (uiDefault: def) until ctx ends or
// stop is called, and prints its URL on stderr.
func startUI(ctx context.Context, g *Globals, addr, def string, cfg webui.Config) (stop func(), err error) {
	if addr == uiDefault {
		addr = def
	}
	cfg.Tokens, err = uiTokens(g)
	if err != nil {
		return nil, err
	}
	cfg.Logger = g.Logger
	srv := webui.New(cfg)
	ln, err := srv.Listen(addr)
	if err != nil {
		return nil, withCode(exitBadInput, fmt.Errorf("--ui: %w", err))
	}
	fmt.Fprintf(os.Stderr, "web view: %s\n", srv.URL(ln))
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx, ln); err != nil {
			g.Logger.Warn("web view", "err", err)
		}
	}()
	return func() { cancel(); wg.Wait() }, nil
}

// runPeers is the swarm as `p2pc run` sees it: this machine's slots, the
// members gossip knows, and the job's work sessions (every stage's, for a
// job with stages) (a session that broke
// makes its peer "lost" at once, before gossip declares it dead).
type runPeers struct {
	self    string // the name of this machine's slots
	member  string // its own entry in the membership (HOST-run-PID)
	slots   int
	live    interface{ Sessions() []job.PeerSession } // *job.Live, *job.GraphLive
	members func() []discovery.Member                 // nil without a swarm
	conf    string
}

func (p *runPeers) Peers() []webui.Peer {
	out := []webui.Peer{{Name: p.self, OS: runtime.GOOS, Arch: runtime.GOARCH, Slots: p.slots, Used: -1, Confinement: p.conf, Self: true}}
	if p.slots == 0 {
		out = out[:0]
	}
	byID := map[string]int{}
	if p.members != nil {
		out = appendMembers(out, byID, p.members(), func(m discovery.Member) bool { return m.Name == p.member })
	}
	for _, s := range latestSessions(p.live.Sessions()) {
		name, id := report.SplitPeer(s.Peer)
		i, ok := byID[id]
		if !ok || id == "" {
			i = len(out)
			out = append(out, webui.Peer{Name: name, ID: id, Slots: s.Slots, Used: -1})
		}
		switch {
		case s.Up:
			// Its session works: it is live whatever gossip still says
			// of an earlier life (a restart under the same node ID).
			out[i].Name = name
			if out[i].State == webui.PeerLost {
				out[i].State = ""
			}
			if s.Err != "" {
				out[i].Note = "back; its earlier session broke: " + s.Err
			}
		case s.Err != "":
			out[i].State, out[i].Note, out[i].Used = webui.PeerLost, s.Err, 0
		default:
			out[i].State, out[i].Note = webui.PeerIdle, "not working for this job"
		}
	}
	return out
}

// appendMembers adds the members that run work to out, one per node ID
// (a node that restarted under another name is one node: its live
// entry wins), and notes their places in byID.
func appendMembers(out []webui.Peer, byID map[string]int, members []discovery.Member, skip func(discovery.Member) bool) []webui.Peer {
	for _, m := range members {
		if skip(m) || m.GRPCAddr == "" {
			continue // this node, and observers (p2pc peers): no work
		}
		st := ""
		if m.State != discovery.StateAlive {
			st = webui.PeerLost
		}
		pe := webui.Peer{Name: m.Name, ID: m.ID, OS: m.OS, Arch: m.Arch, Slots: m.Slots, Used: m.Slots - m.FreeSlots, State: st, Confinement: m.Sandbox, GPUs: m.GPUs}
		if i, ok := byID[m.ID]; ok && m.ID != "" {
			if out[i].State == webui.PeerLost && st == "" {
				out[i] = pe
			}
			continue
		}
		byID[m.ID] = len(out)
		out = append(out, pe)
	}
	return out
}

// latestSessions keeps the newest session of each node (by node ID,
// else by key): a node that restarted is shown by its new session. When
// that one is up and an older one broke, its Err is the older one's
// error (the view shows it as past).
func latestSessions(all []job.PeerSession) []job.PeerSession {
	var out []job.PeerSession
	at := map[string]int{}
	for _, s := range all {
		name, id := report.SplitPeer(s.Peer)
		k := id
		if k == "" {
			k = name
		}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, s)
			continue
		}
		older, newer := out[i], s
		if older.Since.After(newer.Since) {
			older, newer = newer, older
		}
		if newer.Up && newer.Err == "" {
			newer.Err = older.Err
		}
		out[i] = newer
	}
	return out
}

// nodePeers is the swarm as `p2pc join` sees it: itself and the members.
type nodePeers struct {
	n        *node.Node
	presence *node.Presence
	conf     string
}

func (p *nodePeers) Peers() []webui.Peer {
	busy, _, _ := p.n.Load()
	self := webui.Peer{Name: p.n.Name(), ID: p.n.ID().String(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Slots: p.n.AllSlots(), Used: busy, Done: p.n.Stats().Done, Confinement: p.conf, GPUs: p.n.GPUSummary(), Self: true}
	byID := map[string]int{self.ID: 0}
	return appendMembers([]webui.Peer{self}, byID, p.presence.Members(), func(m discovery.Member) bool { return m.Name == p.n.Name() || m.ID == self.ID })
}

// nodeServed lists the jobs a `p2pc join` serves, for its web view.
type nodeServed struct{ n *node.Node }

func (s nodeServed) Served() []webui.ServedJob {
	var out []webui.ServedJob
	for _, j := range s.n.Served() {
		out = append(out, webui.ServedJob{ID: j.JobID, Name: j.JobName, Submitter: j.Coordinator, SubmitterID: j.CoordinatorID,
			Since: j.Since, Serving: j.Sessions > 0, Running: j.Running, Queued: j.Queued, Done: j.Done, Failed: j.Failed,
			CPUTime: j.CPU, Memory: j.Memory})
	}
	return out
}

// confinement says what confines this machine's tasks.
func confinement() string { return sandbox.Probe().String() }

// graphUI is a job with stages for the web view: its tasks as one job's
// and a line per stage.
type graphUI struct{ *job.GraphLive }

func (g graphUI) Stages() []webui.Stage {
	var out []webui.Stage
	for _, s := range g.GraphLive.Stages() {
		out = append(out, webui.Stage{Name: s.Name, Needs: s.Needs, State: s.State, Total: s.Tasks,
			Done: s.Done, Failed: s.Failed, Blocked: s.Blocked, Running: s.Running})
	}
	return out
}
