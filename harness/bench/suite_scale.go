package bench

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

func init() { Register(scaleSuite{}) }

// scaleSuite is the scale-out experiment no seed paper ran: how
// membership, enrolment and the coordinator behave as the swarm grows.
// For each peer count, a lab of that many peers (one slot each, a network
// namespace each on the lab's bridge, no CPU quota) that find each other
// through the first peer (--join), and per round: the time until every
// peer has every other in its membership, an idle job (one long task per
// peer: the coordinator only keeps leases), and a busy job of many short
// tasks.
type scaleSuite struct{}

func (scaleSuite) Info() Info {
	return Info{Name: "scale", Title: "Scale-out: membership, enrolment and the coordinator as the swarm grows", Paper: "no paper: issue 19", Order: 60}
}

// scaleConfig is the suite's section of benchmarks/bench.yaml.
type scaleConfig struct {
	// Peers are the swarm sizes measured.
	Peers []int `yaml:"peers"`
	// Tasks of TaskMS milliseconds each make the busy job.
	Tasks  int `yaml:"tasks"`
	TaskMS int `yaml:"task_ms"`
	// IdleMS is the one task per peer of the idle job.
	IdleMS int `yaml:"idle_ms"`
	// Rounds per size (the peers restarted between rounds): 5 or more for
	// a confidence interval.
	Rounds int `yaml:"rounds"`
	// MembershipTimeout bounds the wait for a full membership.
	MembershipTimeout string `yaml:"membership_timeout"`
	// Timeout bounds each job.
	Timeout string `yaml:"timeout"`
}

// scaleRound is one round's measurements at one swarm size.
type scaleRound struct {
	// MembershipS: the peers' processes started to every peer having
	// logged every other as a member; UpToMembershipS: from the moment
	// every peer listened (the processes' own start-up left out).
	MembershipS     Float `json:"membership_s"`
	UpToMembershipS Float `json:"up_to_membership_s"`
	// EnrolS: the busy job's p2pc run start to every peer holding a
	// lease; Leased how many peers got one (all, unless NaN).
	EnrolS Float `json:"enrol_s"`
	Leased int   `json:"peers_leased"`
	// Rate is the busy job's tasks per second over its makespan, WallRate
	// over the whole command.
	Rate     Float `json:"tasks_per_s"`
	WallRate Float `json:"tasks_per_s_wall"`
	// IdleCPU and BusyCPU are the coordinator's (the p2pc run process's)
	// CPU seconds per peer per second: while every peer holds a long
	// task of the idle job (nothing to dispatch), and over the busy job's
	// makespan.
	IdleCPU Float `json:"coordinator_cpu_idle"`
	BusyCPU Float `json:"coordinator_cpu_busy"`
}

// scalePoint is one swarm size.
type scalePoint struct {
	Peers  int          `json:"peers"`
	Rounds []scaleRound `json:"rounds"`
	// The rounds' medians with 95% intervals.
	Membership Interval `json:"membership_s"`
	UpToMember Interval `json:"up_to_membership_s"`
	Enrol      Interval `json:"enrol_s"`
	Rate       Interval `json:"tasks_per_s"`
	WallRate   Interval `json:"tasks_per_s_wall"`
	IdleCPU    Interval `json:"coordinator_cpu_idle"`
	BusyCPU    Interval `json:"coordinator_cpu_busy"`
}

func (scaleSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg := scaleConfig{Peers: []int{8, 32, 96}, Tasks: 4096, TaskMS: 20, IdleMS: 3000, Rounds: 5, MembershipTimeout: "2m", Timeout: "5m"}
	if err := env.Config.Decode("scale", env.Quick, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Peers) == 0 || cfg.Tasks < 1 || cfg.TaskMS < 0 || cfg.IdleMS < 100 || cfg.Rounds < 1 {
		return nil, fmt.Errorf("scale: need peers, tasks >= 1, task_ms >= 0, idle_ms >= 100, rounds >= 1: %+v", cfg)
	}
	for _, n := range cfg.Peers {
		if n < 2 || n > 240 {
			return nil, fmt.Errorf("scale: %d peers: want 2 to 240", n)
		}
	}
	memTimeout, err := time.ParseDuration(cfg.MembershipTimeout)
	if err != nil {
		return nil, fmt.Errorf("scale: membership_timeout: %w", err)
	}
	timeout, err := time.ParseDuration(cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("scale: timeout: %w", err)
	}
	plugin, err := env.Plugin(ctx, "echo")
	if err != nil {
		return nil, err
	}
	busy, err := env.WriteSpec("scale-busy", JobSpec{Name: "bench-scale-busy", Plugin: plugin,
		Params: map[string]any{"sleep_ms": cfg.TaskMS}, Tasks: []any{Range("i", cfg.Tasks)}, Timeout: "1m"})
	if err != nil {
		return nil, err
	}
	if err := env.KeepSpec(busy, "job.yaml"); err != nil {
		return nil, err
	}
	phase := env.Progress.Phase("scale", len(cfg.Peers)*cfg.Rounds)
	defer phase.Done()
	var points []scalePoint
	for _, n := range cfg.Peers {
		idle, err := env.WriteSpec(fmt.Sprintf("scale-idle-%d", n), JobSpec{Name: fmt.Sprintf("bench-scale-idle-%d", n), Plugin: plugin,
			Params: map[string]any{"sleep_ms": cfg.IdleMS}, Tasks: []any{Range("i", n)}, Timeout: "1m"})
		if err != nil {
			return nil, err
		}
		pt, err := env.scaleSize(ctx, n, cfg, idle, busy, memTimeout, timeout, phase)
		if err != nil {
			return nil, fmt.Errorf("scale: %d peers: %w", n, err)
		}
		points = append(points, pt)
	}
	res := &Result{}
	scaleRows(res, points)
	growth := scaleGrowth(points)
	for _, g := range growth {
		res.Note("%s", g)
	}
	if err := scaleWrite(env, cfg, points, growth); err != nil {
		return nil, err
	}
	res.Note("%v peers of 1 slot each, one network namespace each on the lab's bridge, no CPU quota, all on this machine's %d cores (an idle peer holds about 20 MB); busy job: %d echo tasks of %d ms; idle job: one %d ms task per peer; medians of %d rounds [95%% bootstrap CI], the peers restarted between rounds", cfg.Peers, env.Machine.Cores, cfg.Tasks, cfg.TaskMS, cfg.IdleMS, cfg.Rounds)
	return res, nil
}

// memberJoinedRe matches a peer's log line for a member that joined its
// membership (discovery: "member joined", at log level info, slog's text
// format): the line's time and the member.
var memberJoinedRe = regexp.MustCompile(`(?m)^time=(\S+) .*member joined.*? member=(\S+)`)

// scaleSize measures one swarm size.
func (e *Env) scaleSize(ctx context.Context, n int, cfg scaleConfig, idle, busy string, memTimeout, timeout time.Duration, phase Phase) (scalePoint, error) {
	pt := scalePoint{Peers: n}
	peers := make([]harness.PeerSpec, n)
	for i := range peers {
		// Info logs carry the "member joined" lines the membership time
		// is read from.
		peers[i] = harness.PeerSpec{Name: fmt.Sprintf("peer%03d", i+1), Slots: 1, Args: []string{"--log-level", "info"}}
	}
	lab, err := e.newLab(ctx, peers, func(c *harness.LabConfig) {
		c.JoinFirst = true
		c.StartTimeout = 2 * time.Minute
	})
	if err != nil {
		return pt, err
	}
	defer lab.Close()
	for r := range cfg.Rounds {
		if r > 0 {
			if err := lab.RestartPeers(ctx); err != nil {
				return pt, err
			}
		}
		var round scaleRound
		up := time.Now() // NewLab and RestartPeers return once every peer listens
		full, err := waitMembership(ctx, lab, memTimeout)
		if err != nil {
			return pt, err
		}
		round.MembershipS = Float(full.Sub(lab.Started()).Seconds())
		round.UpToMembershipS = Float(math.Max(0, full.Sub(up).Seconds()))
		// The submitter joins the first peer and finds the rest through
		// the membership, as a user's does.
		first := []string{lab.Peers()[0].Addr}
		sample := 100 * time.Millisecond
		sub, err := e.Submit(ctx, lab, idle, harness.SubmitOptions{Join: first, Timeout: timeout, SampleCPU: sample})
		if err != nil {
			return pt, fmt.Errorf("idle job: %w", err)
		}
		round.IdleCPU = Float(idleCPU(sub, n))
		sub, err = e.Submit(ctx, lab, busy, harness.SubmitOptions{Join: first, Timeout: timeout, SampleCPU: sample})
		if err != nil {
			return pt, fmt.Errorf("busy job: %w", err)
		}
		span := SpanOf(sub.Report)
		round.Rate = Float(span.Rate())
		if sub.Wall > 0 {
			round.WallRate = Float(float64(span.Tasks) / sub.Wall.Seconds())
		}
		enrol, leased := enrolTime(sub.Report, sub.Started, n)
		round.EnrolS, round.Leased = Float(enrol), leased
		round.BusyCPU = Float(cpuPerPeer(sub, span.First, span.Last, n))
		pt.Rounds = append(pt.Rounds, round)
		phase.Step(fmt.Sprintf("%d peers, round %d: membership %.2f s, all leased after %.2f s, %.0f tasks/s, coordinator %.3f / %.3f ms per peer per s idle / busy",
			n, r+1, round.MembershipS, round.EnrolS, round.Rate, 1000*round.IdleCPU, 1000*round.BusyCPU))
	}
	pick := func(f func(scaleRound) Float) Interval {
		var xs []float64
		for _, r := range pt.Rounds {
			xs = append(xs, float64(f(r)))
		}
		return MedianCI(xs)
	}
	pt.Membership = pick(func(r scaleRound) Float { return r.MembershipS })
	pt.UpToMember = pick(func(r scaleRound) Float { return r.UpToMembershipS })
	pt.Enrol = pick(func(r scaleRound) Float { return r.EnrolS })
	pt.Rate = pick(func(r scaleRound) Float { return r.Rate })
	pt.WallRate = pick(func(r scaleRound) Float { return r.WallRate })
	pt.IdleCPU = pick(func(r scaleRound) Float { return r.IdleCPU })
	pt.BusyCPU = pick(func(r scaleRound) Float { return r.BusyCPU })
	if err := lab.CheckLogs(); err != nil {
		return pt, err
	}
	return pt, lab.Close()
}

// waitMembership waits until every peer of the lab has logged every other
// peer as a member, and returns when that was: the time of the last log
// line that completed a peer's membership.
func waitMembership(ctx context.Context, lab *harness.Lab, timeout time.Duration) (time.Time, error) {
	peers := lab.Peers()
	names := map[string]bool{}
	for _, p := range peers {
		names[p.Name] = true
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var last time.Time
		full, worst, worstLog := 0, len(peers), ""
		for _, p := range peers {
			log := p.Proc.Stderr()
			seen, at := membersSeen(log, p.Name, names)
			if seen == len(peers)-1 {
				full++
				if at.After(last) {
					last = at
				}
			}
			if seen < worst {
				worst, worstLog = seen, log
			}
		}
		if full == len(peers) {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("membership: after %s, %d of %d peers know all others (the worst knows %d); its log ends:\n%s", timeout, full, len(peers), worst, tail(worstLog, 1500))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// membersSeen reads a peer's log: how many of the other peers (names, but
// self) it logged as members, and when the last of them first joined.
func membersSeen(log, self string, names map[string]bool) (int, time.Time) {
	seen := map[string]bool{}
	var last time.Time
	for _, m := range memberJoinedRe.FindAllStringSubmatch(log, -1) {
		name := strings.Trim(m[2], `"`)
		if name == self || !names[name] || seen[name] {
			continue
		}
		seen[name] = true
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && at.After(last) {
			last = at
		}
	}
	return len(seen), last
}

// enrolTime is the time from the submitter's start to the moment every
// peer held a lease (NaN if some never did), and how many did.
func enrolTime(rep *report.Report, started time.Time, peers int) (float64, int) {
	first := map[string]time.Time{}
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if f, ok := first[a.Peer]; a.Peer != "" && (!ok || a.Start.Before(f)) {
				first[a.Peer] = a.Start
			}
		}
	}
	var last time.Time
	for _, t := range first {
		if t.After(last) {
			last = t
		}
	}
	if len(first) < peers || last.IsZero() {
		return math.NaN(), len(first)
	}
	return last.Sub(started).Seconds(), len(first)
}

// cpuAt is the run process's CPU time at time t, interpolated between its
// samples (which count from the process's start).
func cpuAt(sub *harness.Submission, t time.Time) (time.Duration, bool) {
	at := t.Sub(sub.Started)
	s := sub.CPU
	if len(s) < 2 || at < s[0].At || at > s[len(s)-1].At {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i].At >= at {
			a, b := s[i-1], s[i]
			if b.At == a.At {
				return b.CPU, true
			}
			f := float64(at-a.At) / float64(b.At-a.At)
			return a.CPU + time.Duration(f*float64(b.CPU-a.CPU)), true
		}
	}
	return 0, false
}

// cpuPerPeer is the run process's CPU seconds per peer per second between
// from and to (NaN if the window is under 300 ms or outside the samples).
func cpuPerPeer(sub *harness.Submission, from, to time.Time, peers int) float64 {
	d := to.Sub(from)
	if d < 300*time.Millisecond || peers < 1 {
		return math.NaN()
	}
	a, ok1 := cpuAt(sub, from)
	b, ok2 := cpuAt(sub, to)
	if !ok1 || !ok2 {
		return math.NaN()
	}
	return (b - a).Seconds() / d.Seconds() / float64(peers)
}

// idleCPU is cpuPerPeer over the idle job's quiet window: from the last
// lease issued before the first result to that result, while the peers
// run their long tasks and the coordinator has nothing to dispatch (a
// lease handed on later, to a peer that had none, falls after it).
func idleCPU(sub *harness.Submission, peers int) float64 {
	from, to := quietWindow(sub.Report)
	if to.IsZero() {
		return math.NaN()
	}
	return cpuPerPeer(sub, from, to, peers)
}

// quietWindow is the idle job's quiet window (zero times if none).
func quietWindow(rep *report.Report) (from, to time.Time) {
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if a.Outcome == report.OutcomeOK && (to.IsZero() || a.End.Before(to)) {
				to = a.End
			}
		}
	}
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if a.Start.Before(to) && a.Start.After(from) {
				from = a.Start
			}
		}
	}
	return from, to
}

// scaleRows adds the headline rows: every figure at every size.
func scaleRows(res *Result, points []scalePoint) {
	for _, p := range points {
		who := fmt.Sprintf("%d peers x 1 slot", p.Peers)
		res.Add(who, "all in the membership (s) after the peers started / after all listened, median [95% CI]", p.Membership.Format(f2)+" / "+p.UpToMember.Format(f2), "")
		res.Add(who, "p2pc run start to every peer holding a lease (s) [95% CI]", p.Enrol.Format(f2), "")
		res.Add(who, "tasks/s over the makespan / over the whole command [95% CI]", p.Rate.Format(f0)+" / "+p.WallRate.Format(f0), "")
		res.Add(who, "coordinator CPU per peer per second, idle / busy (ms/s) [95% CI]", p.IdleCPU.Scale(1000).Format(f2)+" / "+p.BusyCPU.Scale(1000).Format(f2), "")
	}
}

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }

// scaleGrowth says, for the figures that should grow at most linearly
// with the peers, where they grow faster or slower than linearly from one
// size to the next.
func scaleGrowth(points []scalePoint) []string {
	type metric struct {
		name    string
		get     func(scalePoint) float64
		perPeer bool // a per-peer figure: linear growth of the total is a flat line
	}
	metrics := []metric{
		{"time to a full membership", func(p scalePoint) float64 { return p.Membership.Median }, false},
		{"time to a full membership once every peer listened", func(p scalePoint) float64 { return p.UpToMember.Median }, false},
		{"time until every peer holds a lease", func(p scalePoint) float64 { return p.Enrol.Median }, false},
		{"coordinator CPU while idle (total)", func(p scalePoint) float64 { return p.IdleCPU.Median }, true},
		{"coordinator CPU while busy (total)", func(p scalePoint) float64 { return p.BusyCPU.Median }, true},
	}
	var out []string
	for _, m := range metrics {
		var parts []string
		for i := 1; i < len(points); i++ {
			a, b := points[i-1], points[i]
			ya, yb := m.get(a), m.get(b)
			if m.perPeer {
				ya, yb = ya*float64(a.Peers), yb*float64(b.Peers)
			}
			if !(ya > 0) || math.IsNaN(yb) {
				continue
			}
			k, peers := yb/ya, float64(b.Peers)/float64(a.Peers)
			verdict := "about linear"
			switch {
			case k > 1.25*peers:
				verdict = "**faster than linear**"
			case k < peers/1.25:
				verdict = "slower than linear"
			}
			parts = append(parts, fmt.Sprintf("%d→%d peers (x%.1f): x%.2f, %s", a.Peers, b.Peers, peers, k, verdict))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("growth of the %s: %s", m.name, strings.Join(parts, "; ")))
		}
	}
	return out
}

// scaleWrite writes scale.json, scale.csv, the plots and summary.md.
func scaleWrite(env *Env, cfg scaleConfig, points []scalePoint, growth []string) error {
	if err := env.WriteJSON("scale.json", map[string]any{
		"machine": env.Machine, "config": cfg, "quick": env.Quick, "points": points,
		"definitions": map[string]string{
			"membership_s":         "the peers' processes started (after the lab's network was built) until every peer has logged every other as a member (the log line's time)",
			"up_to_membership_s":   "the same from the moment every peer listened (0 if the membership was complete by then)",
			"enrol_s":              "the busy job's p2pc run process start until every peer holds a lease (its first attempt's start, report.json)",
			"tasks_per_s":          "busy job: tasks / makespan (first lease to last result)",
			"tasks_per_s_wall":     "busy job: tasks / the p2pc run process's start to exit",
			"coordinator_cpu_idle": "CPU seconds of the p2pc run process per peer per second, from the idle job's last lease to its first result: every peer runs a long task, nothing to dispatch",
			"coordinator_cpu_busy": "the same over the busy job's makespan",
		},
	}); err != nil {
		return err
	}
	var rows [][]string
	for _, p := range points {
		for i, r := range p.Rounds {
			rows = append(rows, []string{fmt.Sprint(p.Peers), fmt.Sprint(i + 1), f3(float64(r.MembershipS)), f3(float64(r.UpToMembershipS)), f3(float64(r.EnrolS)), fmt.Sprint(r.Leased),
				f1(float64(r.Rate)), f1(float64(r.WallRate)), fmt.Sprintf("%.5f", float64(r.IdleCPU)), fmt.Sprintf("%.5f", float64(r.BusyCPU))})
		}
	}
	if err := env.WriteCSV("scale.csv", []string{"peers", "round", "membership_s", "up_to_membership_s", "enrol_s", "peers_leased", "tasks_per_s", "tasks_per_s_wall", "coordinator_cpu_idle_per_peer", "coordinator_cpu_busy_per_peer"}, rows); err != nil {
		return err
	}
	xs := make([]float64, len(points))
	for i, p := range points {
		xs[i] = float64(p.Peers)
	}
	series := func(name string, color string, get func(scalePoint) Interval, k float64) Series {
		s := Series{Name: name, X: xs, Kind: LinePoints, Color: color}
		for _, p := range points {
			iv := get(p)
			s.Y, s.Lo, s.Hi = append(s.Y, k*iv.Median), append(s.Lo, k*iv.Lo), append(s.Hi, k*iv.Hi)
		}
		return s
	}
	note := fmt.Sprintf("peers of 1 slot on one bridge, all on %d cores; medians of %d rounds, bars: 95%% CI; %s", env.Machine.Cores, cfg.Rounds, quickNote(env))
	plots := []struct {
		file string
		p    *Plot
	}{
		{"membership.svg", &Plot{Title: "Time until every peer knows every other", XLabel: "peers", YLabel: "seconds since the peers started", XInt: true, XZero: true, YZero: true, XPad: 0.03, Note: note,
			Series: []Series{
				series("since the peers started", Palette[0], func(p scalePoint) Interval { return p.Membership }, 1),
				series("since every peer listened", Palette[1], func(p scalePoint) Interval { return p.UpToMember }, 1),
			}}},
		{"enrol.svg", &Plot{Title: "Time until every peer holds a lease", XLabel: "peers", YLabel: "seconds since p2pc run started", XInt: true, XZero: true, YZero: true, XPad: 0.03, Note: note,
			Series: []Series{series("every peer leased", Palette[1], func(p scalePoint) Interval { return p.Enrol }, 1)}}},
		{"throughput.svg", &Plot{Title: fmt.Sprintf("Throughput of %d tasks of %d ms", cfg.Tasks, cfg.TaskMS), XLabel: "peers", YLabel: "tasks per second", XInt: true, XZero: true, YZero: true, XPad: 0.03, Note: note,
			Series: []Series{
				series("over the makespan", Palette[0], func(p scalePoint) Interval { return p.Rate }, 1),
				series("over the whole command", Palette[1], func(p scalePoint) Interval { return p.WallRate }, 1),
			}}},
		{"coordinator.svg", &Plot{Title: "Coordinator CPU per peer", XLabel: "peers", YLabel: "ms of CPU per peer per second", XInt: true, XZero: true, YZero: true, XPad: 0.03, Note: note,
			Series: []Series{
				series("idle (every peer on a long task)", Palette[2], func(p scalePoint) Interval { return p.IdleCPU }, 1000),
				series("busy (short tasks)", Palette[3], func(p scalePoint) Interval { return p.BusyCPU }, 1000),
			}}},
	}
	for _, pl := range plots {
		if err := env.WriteSVG(pl.file, pl.p.SVG()); err != nil {
			return err
		}
	}
	var md Markdown
	md.P("# Scale-out: membership, enrolment and the coordinator")
	md.P("%s", quickBanner(env))
	md.P("**Setup.** For each swarm size, a lab of that many `p2pc join` peers, 1 slot each, each in its own network namespace on the lab's bridge (lab mode %s), no CPU quota: every peer, its plugin processes and the coordinator share this machine's %d cores, so the figures show how the software's costs grow, not what a LAN of machines would reach. The first peer starts alone; the others are started with `--join` its address and find the rest through the membership's gossip (no mDNS). The submitter (`p2pc run --local-slots 0 --join <first peer>`) runs in a namespace of its own. %d rounds per size; between rounds every peer is restarted (its plugin cache kept).", env.Mode(), env.Machine.Cores, cfg.Rounds)
	md.P("**Figures.** *Membership*: from the start of the peers' processes (the first alone, then the others one after another) until every peer has logged every other as a member (log level info, \"member joined\", the time of the line that completed the last peer's membership), and the same from the moment every peer listened (the processes' own start-up left out). *Enrolment*: from the busy job's `p2pc run` start until every peer holds a lease (report.json). *Throughput*: %d echo tasks of %d ms, over the makespan (first lease to last result) and over the whole command (process start to exit). *Coordinator CPU* (the `p2pc run` process, sampled every 100 ms from /proc) per peer per second: idle is an idle job's quiet window, from its last lease to its first result while every peer runs one %d ms task; busy is the busy job's makespan. Medians of the rounds with 95%% bootstrap intervals.", cfg.Tasks, cfg.TaskMS, cfg.IdleMS)
	var tab [][]string
	for _, p := range points {
		tab = append(tab, []string{fmt.Sprint(p.Peers), p.Membership.Format(f2), p.UpToMember.Format(f2), p.Enrol.Format(f2), p.Rate.Format(f0), p.WallRate.Format(f0),
			p.IdleCPU.Scale(1000).Format(f2), p.BusyCPU.Scale(1000).Format(f2)})
	}
	md.Table([]string{"peers", "membership (s)", "after all listened (s)", "enrolment (s)", "tasks/s (makespan)", "tasks/s (whole command)", "coordinator CPU idle (ms per peer per s)", "busy (ms per peer per s)"}, tab)
	md.P("**Where growth is not linear.** Times against the number of peers, and the coordinator's total CPU (per peer times peers): \"faster than linear\" when a step's factor exceeds the peers' factor by more than a quarter.")
	for _, g := range growth {
		md.WriteString("- " + g + "\n")
	}
	md.WriteString("\n")
	md.P("![membership](membership.svg)\n\n![enrolment](enrol.svg)\n\n![throughput](throughput.svg)\n\n![coordinator CPU](coordinator.svg)")
	md.P("Files: scale.json (every round), scale.csv, membership.svg, enrol.svg, throughput.svg, coordinator.svg, job.yaml (the busy job).")
	return env.WriteMarkdown("summary.md", &md)
}
