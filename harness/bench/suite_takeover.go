package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/swarmjobs"
)

func init() { Register(takeoverSuite{}) }

// takeoverSuite measures issue 31's figures: how long the swarm takes to
// resume a detached job whose owner was SIGKILLed, and what the owner's
// successors cost (bytes sent to them per task, their memory per job).
// Each round gets a lab of its own: a clean job runs to its end (its
// copies and the members' RSS measured), then a job whose owner is killed
// halfway. Not a paper's experiment: "all" leaves it out.
type takeoverSuite struct{}

func (takeoverSuite) Info() Info {
	return Info{Name: "takeover", Title: "A detached job's owner SIGKILLed: takeover time; what its successors cost", Paper: "issue 31", Order: 85, Explicit: true}
}

// takeoverConfig is the suite's section of bench.yaml.
type takeoverConfig struct {
	Peers   int `yaml:"peers"`
	Slots   int `yaml:"slots"`
	Tasks   int `yaml:"tasks"`
	SleepMS int `yaml:"sleep_ms"`
	Kills   int `yaml:"kills"`
	// Warmup is the tasks of a job run before the clean job, so that
	// the members' RSS before it is a warm member's (plugin fetched,
	// connections made); 0: none.
	Warmup  int     `yaml:"warmup"`
	KillAt  float64 `yaml:"kill_at"`
	Timeout string  `yaml:"timeout"`
}

// takeoverRound is one round (takeover.json, rounds.csv).
type takeoverRound struct {
	Round int       `json:"round"`
	Load  string    `json:"loadavg_before"`
	Error string    `json:"error,omitempty"`
	Clean *cleanRun `json:"clean,omitempty"`
	Kill  *killRun  `json:"kill,omitempty"`
}

// cleanRun is a detached job that ran to its end without a fault: what
// its owner sent its successors, and the members' RSS.
type cleanRun struct {
	ID      string              `json:"id"`
	Owner   string              `json:"owner"`
	Holders []string            `json:"holders"`
	Others  []string            `json:"others"` // neither owner nor holder: the control
	JobS    float64             `json:"job_s"`  // detach to complete, as listed
	Sent    copiesSent          `json:"sent"`
	RSS     map[string]rssTrace `json:"rss"`
	// HolderGrowth is the mean peak-minus-before RSS of the holders,
	// OtherGrowth the others'; SuccessorMemory their difference: what
	// holding the job cost a successor beyond running its tasks.
	HolderGrowth    float64 `json:"holder_growth"`
	OtherGrowth     float64 `json:"other_growth"`
	SuccessorMemory float64 `json:"successor_memory"`
	// Heap is each member's live heap (gctrace) before and during the
	// job (a member that never collected is left out); SuccessorHeap
	// (MB) is the holders' mean peak live heap minus the others', NaN
	// (null) where either never collected.
	Heap          map[string]heapTrace `json:"heap"`
	SuccessorHeap Float                `json:"successor_heap_mb"`
	// HeldOnDisk is the size of the first holder's folder of the job
	// once it ended (bundle, output folder, the journal copy).
	HeldOnDisk int64 `json:"held_on_disk"`
}

// killRun is a detached job whose owner was SIGKILLed.
type killRun struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Successor string `json:"successor"`
	Epoch     uint64 `json:"epoch"`
	// DoneAtKill is the tasks done when the owner was killed, as a
	// member listed them just before.
	DoneAtKill int64 `json:"done_at_kill"`
	Total      int64 `json:"total"`
	// TakeoverS: kill to the first lease under the new owner (report.json);
	// DetectS: kill to the successor's "took over" line; CompleteS: kill
	// to the job's end as its record says.
	TakeoverS float64 `json:"takeover_s"`
	DetectS   Float   `json:"detect_s"` // NaN (null): no "took over" line
	CompleteS float64 `json:"complete_s"`
	Reruns    Reruns  `json:"reruns"`
	// AcceptedTwice counts the tasks not done with exactly one accepted
	// attempt.
	AcceptedTwice int `json:"accepted_twice"`
}

// swarmJob is what the suite reads of `p2pc jobs --json`.
type swarmJob struct {
	ID      string    `json:"id"`
	State   string    `json:"state"`
	Owner   string    `json:"owner"`
	Epoch   uint64    `json:"epoch"`
	Done    int64     `json:"done"`
	Total   int64     `json:"total"`
	Ended   time.Time `json:"ended"`
	Holders []string  `json:"holders"`
	Error   string    `json:"error"`
}

func (j swarmJob) ended() bool { return j.State != "" && j.State != "running" }

var (
	detachedRe = regexp.MustCompile(`(?m)^job ([0-9a-f]{64}) owner (\S+)$`)
	tookOverRe = regexp.MustCompile(`took over a job whose owner is gone`)
)

func (takeoverSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg := takeoverConfig{Peers: 4, Slots: 2, Tasks: 2048, SleepMS: 20, Kills: 10, Warmup: 64, KillAt: 0.5, Timeout: "5m"}
	if err := env.Config.Decode("takeover", env.Quick, &cfg); err != nil {
		return nil, err
	}
	limit, err := time.ParseDuration(cfg.Timeout)
	switch {
	case err != nil || limit <= 0:
		return nil, fmt.Errorf("bench config: takeover timeout %q: want a duration like 5m", cfg.Timeout)
	case cfg.Peers < 3:
		return nil, fmt.Errorf("bench config: takeover peers %d: want at least 3 (an owner and two successors)", cfg.Peers)
	case cfg.Tasks < 2 || cfg.Slots < 1 || cfg.SleepMS < 0:
		return nil, fmt.Errorf("bench config: takeover tasks %d, slots %d, sleep_ms %d: want 2 tasks or more, a slot or more", cfg.Tasks, cfg.Slots, cfg.SleepMS)
	case cfg.KillAt <= 0 || cfg.KillAt >= 1:
		return nil, fmt.Errorf("bench config: takeover kill_at %v: want a fraction of the tasks between 0 and 1", cfg.KillAt)
	}
	if env.Runs > 0 {
		cfg.Kills = env.Runs
	}
	cfg.Kills = max(cfg.Kills, 1)
	plugin, err := env.Plugin(ctx, "echo")
	if err != nil {
		return nil, err
	}
	loadStart := loadavg()
	ph := env.Progress.Phase("takeover", cfg.Kills)
	defer ph.Done()
	var rounds []takeoverRound
	for i := range cfg.Kills {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rctx, cancel := context.WithTimeout(ctx, limit)
		r, err := env.takeoverRound(rctx, cfg, plugin, i+1)
		cancel()
		if err != nil {
			r.Error = err.Error()
			env.Progress.Printf("takeover round %d: %s", i+1, firstLine(r.Error))
		}
		rounds = append(rounds, r)
		next := fmt.Sprintf("round %d", i+2)
		if i+1 == cfg.Kills {
			next = "results"
		}
		ph.Step(next)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res, err := env.writeTakeover(cfg, rounds, loadStart, loadavg())
	if err != nil {
		return res, err
	}
	var bad []string
	for _, r := range rounds {
		switch {
		case r.Error != "":
			bad = append(bad, fmt.Sprintf("round %d: %s", r.Round, firstLine(r.Error)))
		case r.Kill.Reruns.Again > 0 || r.Kill.AcceptedTwice > 0:
			bad = append(bad, fmt.Sprintf("round %d: %d finished tasks ran again, %d tasks not accepted exactly once", r.Round, r.Kill.Reruns.Again, r.Kill.AcceptedTwice))
		}
	}
	if len(bad) > 0 {
		return res, fmt.Errorf("takeover: %s", strings.Join(bad, "; "))
	}
	return res, nil
}

// takeoverRound runs one round in a lab of its own: a clean job, then a
// job whose owner is killed at cfg.KillAt.
func (e *Env) takeoverRound(ctx context.Context, cfg takeoverConfig, plugin string, n int) (takeoverRound, error) {
	r := takeoverRound{Round: n, Load: loadavg()}
	specs := make([]harness.PeerSpec, cfg.Peers)
	for i := range specs {
		// Debug: the peers' "task ran" lines count the tasks run again.
		specs[i] = harness.PeerSpec{Name: fmt.Sprintf("m%d", i+1), Slots: cfg.Slots, Args: []string{"--log-level", "debug"}}
	}
	lab, err := e.newLab(ctx, specs, func(c *harness.LabConfig) {
		c.JoinFirst = true
		// The runtime's line per collection gives the live heap.
		c.Env = append(c.Env, "GODEBUG=gctrace=1")
	})
	if err != nil {
		return r, err
	}
	defer lab.Close()
	if _, err := waitMembership(ctx, lab, 30*time.Second); err != nil {
		return r, err
	}
	job := func(kind string, tasks int) (string, error) {
		return e.WriteSpec(fmt.Sprintf("takeover-%s-%d", kind, n), JobSpec{Name: fmt.Sprintf("%s-%d", kind, n), Plugin: plugin,
			Params: map[string]any{"sleep_ms": cfg.SleepMS}, Tasks: []any{Range("i", tasks)}})
	}
	if cfg.Warmup > 0 {
		spec, err := job("warmup", cfg.Warmup)
		if err != nil {
			return r, err
		}
		id, owner, err := e.detach(ctx, lab, spec)
		if err != nil {
			return r, fmt.Errorf("warm-up job: %w", err)
		}
		if _, err := e.waitJob(ctx, lab, peerOtherThan(lab, owner), id, "to end", swarmJob.ended); err != nil {
			return r, fmt.Errorf("warm-up job: %w", err)
		}
	}
	spec, err := job("clean", cfg.Tasks)
	if err != nil {
		return r, err
	}
	if r.Clean, err = e.cleanJob(ctx, lab, spec); err != nil {
		return r, fmt.Errorf("clean job: %w", err)
	}
	if spec, err = job("kill", cfg.Tasks); err != nil {
		return r, err
	}
	if n == 1 {
		if err := e.KeepSpec(spec, "job.yaml"); err != nil {
			return r, err
		}
	}
	// A member takes over nothing in its first seconds: kill an owner
	// only once every member is older, to measure the takeover itself.
	if wait := time.Until(lab.Started().Add(swarmjobs.SettleTime)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	r.Kill, err = e.killJob(ctx, lab, spec, cfg.KillAt)
	if err != nil {
		return r, fmt.Errorf("kill job: %w", err)
	}
	if err := lab.CheckLogs(); err != nil {
		return r, err
	}
	return r, nil
}

// cleanJob detaches spec, lets it run to its end and reads what its owner
// sent to its successors and the members' RSS meanwhile.
func (e *Env) cleanJob(ctx context.Context, lab *harness.Lab, spec string) (*cleanRun, error) {
	pids := map[string]int{}
	for _, p := range lab.Peers() {
		pids[p.Name] = p.Proc.Pid()
	}
	from := map[string]int{}
	for _, p := range lab.Peers() {
		from[p.Name] = len(p.Proc.Stderr())
	}
	rss := sampleRSS(pids, 100*time.Millisecond)
	start := time.Now()
	id, owner, err := e.detach(ctx, lab, spec)
	if err != nil {
		rss.Stop()
		return nil, err
	}
	via := peerOtherThan(lab, owner)
	j, err := e.waitJob(ctx, lab, via, id, "to end", swarmJob.ended)
	traces, rerr := rss.Stop()
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if j.State != "complete" {
		return nil, fmt.Errorf("job %s ended %s: %s", id[:12], j.State, j.Error)
	}
	c := &cleanRun{ID: id, Owner: owner, Holders: j.Holders, JobS: j.Ended.Sub(start).Seconds(), RSS: traces}
	op := labPeer(lab, owner)
	if op == nil {
		return nil, fmt.Errorf("job %s: its owner %q is no member of the lab", id[:12], owner)
	}
	// The owner logs its count once the output folder is copied, after
	// the job ended.
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = op.Proc.WaitStderr(lctx, regexp.MustCompile(`msg="copies sent" .*?job=`+id[:12]))
	cancel()
	if err != nil {
		return nil, err
	}
	var ok bool
	if c.Sent, ok = parseCopiesSent(op.Proc.Stderr(), id); !ok {
		return nil, fmt.Errorf("job %s: the owner's \"copies sent\" line does not parse", id[:12])
	}
	var hold, other, holdHeap, otherHeap []float64
	c.Heap = map[string]heapTrace{}
	for _, p := range lab.Peers() {
		growth := float64(traces[p.Name].Peak - traces[p.Name].Before)
		h, ok := heapWindow(p.Proc.Stderr(), from[p.Name])
		if ok {
			c.Heap[p.Name] = h
		}
		switch {
		case p.Name == owner:
		case slices.Contains(j.Holders, p.Name):
			hold = append(hold, growth)
			if ok {
				holdHeap = append(holdHeap, float64(h.Peak))
			}
		default:
			other = append(other, growth)
			c.Others = append(c.Others, p.Name)
			if ok {
				otherHeap = append(otherHeap, float64(h.Peak))
			}
		}
	}
	if len(hold) == 0 || len(other) == 0 {
		return nil, fmt.Errorf("job %s: holders %v, others %v: want both (more members than 1 + copies)", id[:12], j.Holders, c.Others)
	}
	c.HolderGrowth, c.OtherGrowth = Summarise(hold).Mean, Summarise(other).Mean
	c.SuccessorMemory = c.HolderGrowth - c.OtherGrowth
	c.SuccessorHeap = Float(math.NaN())
	if len(holdHeap) > 0 && len(otherHeap) > 0 {
		c.SuccessorHeap = Float(Summarise(holdHeap).Mean - Summarise(otherHeap).Mean)
	}
	if h := labPeer(lab, j.Holders[0]); h != nil {
		if c.HeldOnDisk, err = dirSize(filepath.Join(h.Data, "jobs", id)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// killJob detaches spec, SIGKILLs its owner once killAt of its tasks are
// done and measures the takeover.
func (e *Env) killJob(ctx context.Context, lab *harness.Lab, spec string, killAt float64) (*killRun, error) {
	// The logs from here on are this job's (the jobs before it ended).
	from := map[string]int{}
	for _, p := range lab.Peers() {
		from[p.Name] = len(p.Proc.Stderr())
	}
	logs := func() map[string]string {
		out := map[string]string{}
		for _, p := range lab.Peers() {
			out[p.Name] = p.Proc.Stderr()[from[p.Name]:]
		}
		return out
	}
	id, owner, err := e.detach(ctx, lab, spec)
	if err != nil {
		return nil, err
	}
	k := &killRun{ID: id, Owner: owner}
	op, via := labPeer(lab, owner), peerOtherThan(lab, owner)
	if op == nil {
		return nil, fmt.Errorf("job %s: its owner %q is no member of the lab", id[:12], owner)
	}
	var total int64
	j, err := e.waitJob(ctx, lab, via, id, fmt.Sprintf("%.0f%% done", 100*killAt), func(j swarmJob) bool {
		total = j.Total
		return j.ended() || j.Total > 0 && float64(j.Done) >= killAt*float64(j.Total)
	})
	if err != nil {
		return nil, err
	}
	if j.ended() {
		return nil, fmt.Errorf("job %s ended (%s) before %.0f%% of it was seen done: give it more tasks", id[:12], j.State, 100*killAt)
	}
	killed := time.Now()
	op.Proc.Kill()
	k.DoneAtKill, k.Total = j.Done, total
	if j, err = e.waitJob(ctx, lab, via, id, "to end after its owner's kill", swarmJob.ended); err != nil {
		return nil, err
	}
	if j.State != "complete" {
		return nil, fmt.Errorf("job %s ended %s after its owner's kill: %s", id[:12], j.State, j.Error)
	}
	k.Successor, k.Epoch, k.CompleteS = j.Owner, j.Epoch, j.Ended.Sub(killed).Seconds()
	sp := labPeer(lab, j.Owner)
	if j.Epoch < 2 || sp == nil || sp == op {
		return nil, fmt.Errorf("job %s complete, owned by %q at epoch %d: no takeover", id[:12], j.Owner, j.Epoch)
	}
	if at := logLineAt(logs()[sp.Name], tookOverRe); !at.IsZero() {
		k.DetectS = Float(at.Sub(killed).Seconds())
	} else {
		k.DetectS = Float(math.NaN())
	}
	out, err := e.fetch(ctx, lab, via, id)
	if err != nil {
		return nil, err
	}
	rep, err := harness.ReadReport(out)
	if err != nil {
		return nil, err
	}
	first := FirstLeaseAfter(rep, killed)
	if first.IsZero() {
		return nil, fmt.Errorf("job %s: no attempt started after the kill", id[:12])
	}
	k.TakeoverS = first.Sub(killed).Seconds()
	k.Reruns = RanAgain(logs(), rep, owner)
	k.AcceptedTwice = len(NotAcceptedOnce(rep))
	return k, nil
}

// swarmCommand runs `p2pc ARGS --no-mdns --join ADDR` in the lab's
// submitter namespace (Lab.P2PCCommand: the swarm's token), with the
// run's submitter data folder, and returns its stdout.
func (e *Env) swarmCommand(ctx context.Context, lab *harness.Lab, addr string, args ...string) (string, error) {
	argv := append([]string{"--data", e.shared.submitData}, args...)
	argv = append(argv, "--no-mdns", "--join", addr)
	return lab.RunP2PC(ctx, argv...)
}

// detach hands spec to the lab's swarm (`p2pc run --detach`) and returns
// the job's ID and its owner.
func (e *Env) detach(ctx context.Context, lab *harness.Lab, spec string) (id, owner string, err error) {
	out, err := e.swarmCommand(ctx, lab, strings.Join(lab.PeerAddrs(), ","), "run", spec, "--detach")
	if err != nil {
		return "", "", err
	}
	m := detachedRe.FindStringSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("p2pc run --detach did not print the job and its owner:\n%s", out)
	}
	return m[1], m[2], nil
}

// waitJob asks member via for job id (`p2pc jobs --json`) until ok says
// yes; what says what it waits for.
func (e *Env) waitJob(ctx context.Context, lab *harness.Lab, via *harness.LabPeer, id, what string, ok func(swarmJob) bool) (swarmJob, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last swarmJob
	for {
		out, err := e.swarmCommand(ctx, lab, via.Addr, "jobs", "--json")
		if err != nil && ctx.Err() == nil {
			return last, err
		}
		var jobs []swarmJob
		if err == nil {
			if err := json.Unmarshal([]byte(out), &jobs); err != nil {
				return last, fmt.Errorf("p2pc jobs --json: %w\n%s", err, tail(out, 500))
			}
		}
		for _, j := range jobs {
			if j.ID == id {
				last = j
				if ok(j) {
					return j, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for job %s %s as member %s lists it (last: %s, %d of %d done): %w", id[:12], what, via.Name, last.State, last.Done, last.Total, ctx.Err())
		case <-t.C:
		}
	}
}

// fetch writes job id's output folder (`p2pc fetch`) into a new folder of
// the work folder and returns it.
func (e *Env) fetch(ctx context.Context, lab *harness.Lab, via *harness.LabPeer, id string) (string, error) {
	out, err := os.MkdirTemp(e.WorkDir, "fetched-")
	if err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	if err := os.Remove(out); err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	if _, err := e.swarmCommand(ctx, lab, via.Addr, "fetch", id, "--out", out); err != nil {
		return "", err
	}
	return out, nil
}

func labPeer(lab *harness.Lab, name string) *harness.LabPeer {
	for _, p := range lab.Peers() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// peerOtherThan is the first member of the lab not named name.
func peerOtherThan(lab *harness.Lab, name string) *harness.LabPeer {
	for _, p := range lab.Peers() {
		if p.Name != name {
			return p
		}
	}
	return nil
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		} else if errors.Is(err, fs.ErrNotExist) {
			err = nil // removed meanwhile
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}

// writeTakeover writes the suite's files and returns its rows.
func (e *Env) writeTakeover(cfg takeoverConfig, rounds []takeoverRound, loadStart, loadEnd string) (*Result, error) {
	res := &Result{}
	var killedAt, takeover, detect, complete, perTask, statePerTask, resultsPerTask, bundle, succMem, succHeap, holdGrowth, otherGrowth, onDisk, stateHolds []float64
	again, lost, twice, measured := 0, 0, 0, 0
	var csv [][]string
	for _, r := range rounds {
		row := []string{strconv.Itoa(r.Round), r.Load, "", "", "", "", "", "", "", "", "", "", "", firstLine(r.Error)}
		if c := r.Clean; c != nil && c.Sent.Tasks > 0 {
			perTask = append(perTask, float64(c.Sent.Bytes)/float64(c.Sent.Tasks))
			statePerTask = append(statePerTask, float64(c.Sent.StateBytes)/float64(c.Sent.Tasks))
			resultsPerTask = append(resultsPerTask, float64(c.Sent.ResultsBytes)/float64(c.Sent.Tasks))
			bundle = append(bundle, float64(c.Sent.JobBytes))
			stateHolds = append(stateHolds, float64(c.Sent.StateHolds))
			succMem = append(succMem, c.SuccessorMemory)
			succHeap = append(succHeap, float64(c.SuccessorHeap))
			holdGrowth = append(holdGrowth, c.HolderGrowth)
			otherGrowth = append(otherGrowth, c.OtherGrowth)
			onDisk = append(onDisk, float64(c.HeldOnDisk))
			row[8] = f1(float64(c.Sent.Bytes) / float64(c.Sent.Tasks))
			row[9] = f1(float64(c.Sent.StateBytes) / float64(c.Sent.Tasks))
			row[10] = f2(c.SuccessorMemory / (1 << 20))
		}
		if k := r.Kill; k != nil {
			measured++
			takeover = append(takeover, k.TakeoverS)
			detect = append(detect, float64(k.DetectS))
			complete = append(complete, k.CompleteS)
			again += k.Reruns.Again
			lost += k.Reruns.Lost
			twice += k.AcceptedTwice
			at := float64(k.DoneAtKill) / float64(max(k.Total, 1))
			killedAt = append(killedAt, at)
			row[2], row[3], row[4], row[5], row[6], row[7] = k.Owner, k.Successor, pct(at), f3(k.TakeoverS), f3(float64(k.DetectS)), f2(k.CompleteS)
			row[11], row[12] = strconv.Itoa(k.Reruns.Again), strconv.Itoa(k.Reruns.Lost)
		}
		csv = append(csv, row)
	}
	to, de, co := MedianCI(takeover), MedianCI(detect), MedianCI(complete)
	maxOf := func(xs []float64) float64 {
		m := math.NaN()
		for _, x := range xs {
			if !math.IsNaN(x) && (math.IsNaN(m) || x > m) {
				m = x
			}
		}
		return m
	}
	secs := func(x float64) string { return f2(x) + " s" }
	setup := fmt.Sprintf("%d members x %d slots, %d echo tasks of %d ms", cfg.Peers, cfg.Slots, cfg.Tasks, cfg.SleepMS)
	res.Add(setup, fmt.Sprintf("takeover: kill to first lease under the new owner, median [95%% CI] (%d kills)", measured), to.Format(secs), "within 5 s (issue 31)")
	res.Add(setup, "takeover: max", secs(maxOf(takeover)), "within 5 s")
	res.Add(setup, "kill to the successor's \"took over\", median; max", secs(de.Median)+"; "+secs(maxOf(detect)), "")
	res.Add(setup, "kill to job complete, median", co.Format(secs), "")
	res.Add(setup, "tasks done when the owner was killed, median", MedianCI(killedAt).Pct(), pct(cfg.KillAt))
	res.Add(setup, "finished tasks run again (all kills)", strconv.Itoa(again), "0")
	mib := func(xs []float64) string { return MedianCI(xs).Scale(1.0/(1<<20)).Format(f2) + " MiB" }
	res.Add(setup, "bytes sent to successors per task while the job runs (journal copies)", MedianCI(statePerTask).Format(f1), "")
	res.Add(setup, "bytes sent to successors per task at the end (output folder copies)", MedianCI(resultsPerTask).Format(f1), "")
	res.Add(setup, "bytes sent to successors per job: the bundle (spec, plugin, inputs)", mib(bundle), "")
	res.Add(setup, "bytes sent to successors per task, all copies (bundle included)", MedianCI(perTask).Format(f1), "")
	res.Add(setup, "successor memory per job: peak live heap of a holder minus the other member's (gctrace)", MedianCI(succHeap).Format(f1)+" MB", "")
	res.Add(setup, "successor memory per job: RSS growth of a holder minus the other member's", mib(succMem), "")
	res.Note("Each of the %d rounds builds a lab of %d `p2pc join` members (%s mode, one membership through the first member's address, no mDNS, no CPU quota, log level debug) and runs two detached jobs (`p2pc run --detach`) of %d echo tasks of %d ms: a clean one to its end, then one whose owner is SIGKILLed (its whole process group: plugin processes too) once a member lists %.0f%% of its tasks done, and only after every member is %s old (a member takes nothing over before). The load average was %s at the start and %s at the end: the members run without CPU quotas, so other work on a shared machine slows them, and the gossip's failure detection with them.",
		len(rounds), cfg.Peers, e.Mode(), cfg.Tasks, cfg.SleepMS, 100*cfg.KillAt, swarmjobs.SettleTime, loadStart, loadEnd)
	res.Note("Takeover: the kill (taken just before the signal) to the earliest attempt in the fetched report.json that the coordinator leased after it and did not get handed over (a peer starts a lease it held ahead before it learns its coordinator died), as TestTakeoverOwnerKilled measures it; the successor's \"took over\" log line splits it into detection (gossip declares the owner dead, the first live holder takes the job) and resumption (the coordinator resumes from the journal copy and leases). Tasks run again: from the members' \"task ran\" lines, a finished task run to its end twice, but for runs whose result died with the killed owner (%d in all, run again rightly) and backup copies of stragglers; %d tasks were not accepted exactly once.", lost, twice)
	res.Note("Bytes sent to successors: the owner counts the protobuf size of every message of its Hold streams (job bundle, journal copies of kind state, the output folder, records; without gRPC, HTTP/2 and TLS framing) and logs them at the job's end (\"copies sent\"). Per task: over the clean job's tasks; the bundle goes to each successor once per job, whatever its size. Journal copies (Hold streams of kind state, all successors) per clean job: %s; each carries a whole job.db snapshot and the task outputs that successor lacks. Successor memory: each member's p2pc RSS sampled every 100 ms through the clean job (after a warm-up job of %d tasks, so that every member had fetched the plugin and met the others); the holders' mean growth (peak minus before the detach) %s, the member that neither owns nor holds the job (the control: it runs tasks as they do) %s; the difference is what holding the job cost in RSS. Most of it is garbage not yet collected (the messages received, 256 KiB each): p2pc collects at GOGC=400 under a soft limit of 128 MiB (cmd/p2pc/gc.go), so a member's RSS grows towards that limit whatever it holds. The live heap says what is kept: each member runs with GODEBUG=gctrace=1, and the largest live heap after a collection during the clean job (in whole MB; a member that did not collect meanwhile: its last before) of the holders is compared with the other member's; members that never collected are left out. What a holder keeps of a job goes to disk: %s once the job ended (bundle, output folder).",
		MedianCI(stateHolds).Format(f1), cfg.Warmup, mib(holdGrowth), mib(otherGrowth), mib(onDisk))
	for _, r := range rounds {
		if r.Error != "" {
			res.Note("Round %d failed: %s", r.Round, firstLine(r.Error))
		}
	}
	header := []string{"round", "load", "owner", "successor", "killed_at", "takeover_s", "detect_s", "complete_s", "bytes_per_task", "state_bytes_per_task", "successor_mib", "ran_again", "lost_with_dead", "error"}
	if err := e.WriteCSV("rounds.csv", header, csv); err != nil {
		return res, err
	}
	raw := map[string]any{"config": cfg, "loadavg_start": loadStart, "loadavg_end": loadEnd, "mode": e.Mode().String(),
		"takeover_s": to, "detect_s": de, "complete_s": co, "bytes_per_task": MedianCI(perTask), "successor_memory": MedianCI(succMem), "rounds": rounds}
	if err := e.WriteJSON("takeover.json", raw); err != nil {
		return res, err
	}
	var md Markdown
	md.P("# Takeover of a detached job (issue 31)")
	md.Table([]string{"setup", "metric", "value", "wanted"}, rowsOf(res))
	for _, n := range res.Notes {
		md.P("%s", n)
	}
	md.Table(header, csv)
	if err := e.WriteMarkdown("summary.md", &md); err != nil {
		return res, err
	}
	res.Files = []string{"takeover.json", "rounds.csv", "summary.md", "job.yaml"}
	return res, nil
}
