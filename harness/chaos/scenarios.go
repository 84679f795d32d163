package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/testwait"
)

// Scenarios returns every scenario, in a fixed order.
func Scenarios() []Scenario {
	return []Scenario{
		malformed,
		submitterDiskFull,
		corruptBlock,
		peerDiskFull,
		sigstopMDNS,
		sigstopJoin,
		partition,
		ownerPartition,
		connFlood,
		colluders,
		churn,
		submitterKill,
		submitterGone,
	}
}

// Find returns the scenarios named (all for none).
func Find(names ...string) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 0 {
		return all, nil
	}
	var out []Scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no chaos scenario %q", n)
		}
	}
	return out, nil
}

// completes waits for a run expected to complete and checks its report
// against the clean run's outputs.
func completes(ctx context.Context, run *harness.Running, outDir string, want map[string]string, single bool, out *Outcome) (*report.Report, error) {
	sub, err := run.Wait(ctx)
	if sub != nil {
		out.Exit, out.Wall = sub.ExitCode, out.Wall+sub.Wall
		if sub.Report != nil {
			out.Lost += lost(sub.Report)
		}
	}
	if err != nil {
		return nil, err
	}
	rep := sub.Report
	if rep.State != report.StateComplete {
		return rep, fmt.Errorf("job %s: %s", rep.State, rep.Error)
	}
	return rep, checkReport(rep, outDir, want, single)
}

// failsLoudly waits for a run expected to fail: exit code want, within
// bound, saying each of says on stderr; its report (if any) consistent.
func failsLoudly(ctx context.Context, run *harness.Running, outDir string, want int, bound time.Duration, out *Outcome, says ...string) (*harness.Submission, error) {
	sub, err := run.Wait(ctx)
	if sub == nil {
		return nil, err
	}
	out.Exit, out.Wall = sub.ExitCode, out.Wall+sub.Wall
	if sub.ExitCode != want {
		return sub, fmt.Errorf("exit %d, want %d\n%s", sub.ExitCode, want, tailLines(sub.Stderr, 30))
	}
	if sub.Wall > bound {
		return sub, fmt.Errorf("took %s to fail, want within %s", sub.Wall.Round(time.Millisecond), bound)
	}
	for _, w := range says {
		if !regexp.MustCompile(w).MatchString(sub.Stderr) {
			return sub, fmt.Errorf("stderr does not say %q:\n%s", w, tailLines(sub.Stderr, 30))
		}
	}
	if sub.Report != nil {
		out.Lost += lost(sub.Report)
		if err := checkReport(sub.Report, outDir, nil, true); err != nil {
			return sub, err
		}
	}
	return sub, nil
}

// twoPeers is the lab of most scenarios: peers a and b, 2 slots each.
func twoPeers() []harness.PeerSpec {
	return []harness.PeerSpec{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}
}

// excluded returns why the report excluded peer ("" if not).
func excluded(rep *report.Report, peer string) string {
	for _, e := range rep.Excluded {
		if e.Peer == peer {
			return e.Reason
		}
	}
	return ""
}

var malformed = Scenario{
	Name:  "malformed",
	Short: true,
	Doc: "An honest peer and one whose every result is malformed (`join --fault-malformed`) run a 24-task job. " +
		"The bad peer must be excluded after 3 strikes (report `excluded`), none of its results accepted, and the job " +
		"completes with a clean run's outputs (recover = submission to the exclusion).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "malformed", job: e.echoJob(24, 100, ""),
			peers: []harness.PeerSpec{{Name: "good", Slots: 2}, {Name: "bad", Slots: 2, Args: []string{"--fault-malformed"}}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		out = &Outcome{}
		rep, err := r.complete(ctx, r.spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "2"}}, r.want, true, out)
		if err != nil {
			return out, err
		}
		if why := excluded(rep, "bad"); !strings.Contains(why, "malformed") {
			return out, fmt.Errorf("bad excluded for %q, want malformed results (excluded %+v)", why, rep.Excluded)
		}
		if n := okOn(rep, "bad"); n != 0 {
			return out, fmt.Errorf("%d malformed results accepted", n)
		}
		for _, x := range rep.Excluded {
			if x.Peer == "bad" {
				out.Recover = x.Time.Sub(rep.Started)
			}
		}
		out.note("bad excluded %s into the job", out.Recover.Round(time.Millisecond))
		return out, nil
	},
}

var submitterDiskFull = Scenario{
	Name:  "submitter-disk-full",
	Short: true,
	Doc: "The submitter's output folder is on a 1 MiB tmpfs (a private mount namespace) and the 16 tasks write " +
		"256 KiB each. The run must stop at once with exit code 4 saying 'no space left on device' (or, when job.db's write fails first, 'disk full'), charge no peer, " +
		"and leave a consistent report; after the disk is made roomy, a rerun into the same folder completes with " +
		"a clean run's outputs without running again what was done (recover = the failing run's length).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		body := strings.Replace(e.echoJob(16, 0, ""), "params: {sleep_ms: 0}", "params: {sleep_ms: 0, output_bytes: 262144}", 1)
		r, err := e.start(ctx, setup{name: "subfull", job: body, peers: twoPeers()})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		want := r.want
		disk := filepath.Join(r.dir, "disk")
		m, err := r.lab.Tmpfs(disk, 1<<20)
		if err != nil {
			return nil, err
		}
		o := harness.SubmitOptions{Mount: m, Args: []string{"--wait-peers", "10s"}}
		o.Spec, o.Out, o.Data, o.Timeout = r.spec, filepath.Join(disk, "out"), e.Data, 60*time.Second
		run, err := r.lab.StartSubmit(o)
		if err != nil {
			return nil, err
		}
		out = &Outcome{}
		sub, werr := run.Wait(ctx)
		if sub == nil {
			return out, werr
		}
		out.Exit, out.Wall, out.Recover = sub.ExitCode, sub.Wall, sub.Wall
		if sub.ExitCode != 4 || !strings.Contains(sub.Stderr, "no space left on device") && !strings.Contains(sub.Stderr, "disk full") {
			return out, fmt.Errorf("exit %d, want 4 saying 'no space left on device'\n%s", sub.ExitCode, tailLines(sub.Stderr, 30))
		}
		if sub.Wall > 30*time.Second {
			return out, fmt.Errorf("took %s to stop", sub.Wall.Round(time.Millisecond))
		}
		doneBefore := map[string]bool{}
		if rep := sub.Report; rep != nil {
			out.Lost += lost(rep)
			if len(rep.Excluded) > 0 {
				return out, fmt.Errorf("a peer was charged for the submitter's full disk: excluded %+v", rep.Excluded)
			}
			if err := checkReport(rep, m.Path(o.Out), want, true); err != nil {
				return out, fmt.Errorf("the stopped run's report: %w", err)
			}
			for _, t := range rep.Tasks {
				if t.State == report.TaskDone {
					doneBefore[t.ID] = true
				}
			}
			out.note("stopped after %d of %d tasks, exit %d", rep.Summary.Done, rep.Summary.Total, sub.ExitCode)
		}
		freed := time.Now()
		if err := m.Resize(ctx, 64<<20); err != nil {
			return out, err
		}
		run, err = r.lab.StartSubmit(o)
		if err != nil {
			return out, err
		}
		rep, err := completes(ctx, run, m.Path(o.Out), want, true, out)
		if err != nil {
			return out, err
		}
		for _, t := range rep.Tasks {
			if doneBefore[t.ID] && !firstOKAfter(&report.Report{Tasks: []report.Task{t}}, freed, "").IsZero() {
				return out, fmt.Errorf("task %s, done before the disk filled, ran again", t.ID)
			}
		}
		return out, nil
	},
}

// inputJob is echoJob with one input file of 64 KiB (written into dir).
func (e *Env) inputJob(dir string, n, sleepMS int) (string, error) {
	in := filepath.Join(dir, "input.bin")
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		return "", fmt.Errorf("write input: %w", err)
	}
	return e.echoJob(n, sleepMS, "inputs: ["+in+"]\n"), nil
}

// corruptBlocks flips one byte of every block in a peer's store (its
// copies of inputs and plugins) and returns how many it changed.
func corruptBlocks(data string) (int, error) {
	n := 0
	err := filepath.WalkDir(filepath.Join(data, "store", "blocks"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var b [1]byte
		if _, err := f.ReadAt(b[:], 0); err != nil {
			return err
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b[:], 0); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// refetchesBlocks: a peer that finds a bad block fetches it again from
// another holder. Until it does, corrupt-block asserts
// the minimum: the job ends with exit 3, naming the corrupt block.
const refetchesBlocks = true

var corruptBlock = Scenario{
	Name:  "corrupt-block",
	Short: true,
	Doc: "A peer runs a job with an input file, so it holds the input's (and the plugin's) blocks; then every block " +
		"in its store is corrupted on disk and a second job using the same input runs on that peer alone. The peer " +
		"must detect the bad blocks, fetch them again from another holder (the submitter) and complete the job with " +
		"a clean run's outputs (recover = the second job's length).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "corrupt", peers: []harness.PeerSpec{{Name: "a", Slots: 2}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		first, err := e.inputJob(r.dir, 4, 0)
		if err != nil {
			return nil, err
		}
		second := strings.Replace(first, "sleep_ms: 0", "sleep_ms: 1", 1)
		want, err := e.expect(ctx, second)
		if err != nil {
			return nil, err
		}
		out = &Outcome{}
		spec1, err := writeSpec(r.dir, "first", first)
		if err != nil {
			return nil, err
		}
		if _, err := r.complete(ctx, spec1, "out1", harness.SubmitOptions{Args: []string{"--min-peers", "1"}}, nil, true, out); err != nil {
			return out, fmt.Errorf("first job: %w", err)
		}
		n, err := corruptBlocks(r.peer("a").Data)
		if err != nil || n == 0 {
			return out, fmt.Errorf("corrupt the peer's blocks: %d corrupted, %v", n, err)
		}
		out.note("%d blocks corrupted", n)
		spec2, err := writeSpec(r.dir, "second", second)
		if err != nil {
			return nil, err
		}
		run, err := r.submit(spec2, "out2", harness.SubmitOptions{Args: []string{"--wait-peers", "5s"}})
		if err != nil {
			return out, err
		}
		wall := out.Wall
		sub, err := run.Wait(ctx)
		if sub == nil {
			return out, err
		}
		out.Exit, out.Wall, out.Recover = sub.ExitCode, out.Wall+sub.Wall, sub.Wall
		if sub.ExitCode == 3 && !refetchesBlocks {
			// Today's minimum until the peer refetches bad blocks: the
			// run ends by itself, naming the peer's reason.
			out.Wall = wall + sub.Wall
			if !strings.Contains(sub.Stderr, "block corrupt") || sub.Wall > 30*time.Second {
				return out, fmt.Errorf("exit 3 after %s without naming the corrupt block\n%s", sub.Wall.Round(time.Millisecond), tailLines(sub.Stderr, 20))
			}
			out.note("the peer refused the job over its corrupt block; exit 3 after %s (refetch not built yet)", sub.Wall.Round(time.Millisecond))
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if sub.Report.State != report.StateComplete {
			return out, fmt.Errorf("job %s: %s", sub.Report.State, sub.Report.Error)
		}
		out.Lost += lost(sub.Report)
		return out, checkReport(sub.Report, filepath.Join(r.dir, "out2"), want, true)
	},
}

var peerDiskFull = Scenario{
	Name:  "peer-disk-full",
	Short: true,
	Doc: "A peer whose data folder is a 256 KiB tmpfs cannot store the plugin and refuses every job. Alone, the " +
		"job must end with exit code 3 within --wait-peers (5 s) plus slack, naming the peer's refusal; with an " +
		"honest peer beside it, the job completes on that peer with a clean run's outputs (recover = the failing " +
		"run's length).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "peerfull", job: e.echoJob(8, 50, ""),
			peers: []harness.PeerSpec{{Name: "full", Slots: 2, DiskBytes: 256 << 10}, {Name: "good", Slots: 2}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		out = &Outcome{}
		full := r.peer("full")
		run, err := r.submit(r.spec, "alone", harness.SubmitOptions{Join: []string{full.Addr}, Args: []string{"--wait-peers", "5s"}})
		if err != nil {
			return nil, err
		}
		sub, err := failsLoudly(ctx, run, filepath.Join(r.dir, "alone"), 3, 30*time.Second, out, `no progress`, `full@\S+: refused the job`)
		if err != nil {
			return out, fmt.Errorf("alone: %w", err)
		}
		out.Recover = sub.Wall
		rep, err := r.complete(ctx, r.spec, "both", harness.SubmitOptions{Args: []string{"--wait-peers", "10s"}}, r.want, true, out)
		if err != nil {
			return out, fmt.Errorf("with an honest peer: %w", err)
		}
		if n := okOn(rep, "full"); n != 0 {
			return out, fmt.Errorf("the full peer delivered %d results", n)
		}
		return out, nil
	},
}

// sigstop runs a 40-task job on two peers, stops one with SIGSTOP for
// 5 s once it has finished a task, and checks that its leases ran
// elsewhere within a bound.
func sigstop(mdns bool) func(ctx context.Context, e *Env) (*Outcome, error) {
	return func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "sigstop", mdns: mdns, job: e.echoJob(40, 400, ""), peers: twoPeers()})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		run, err := r.submit(r.spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "2"}})
		if err != nil {
			return nil, err
		}
		outDir := filepath.Join(r.dir, "out")
		out = &Outcome{}
		if err := testwait.Until(ctx, 30*time.Second, "peer a to finish a task", func() bool { return okOn(progress(outDir), "a") > 0 }); err != nil {
			return out, err
		}
		a := r.peer("a")
		if err := a.Proc.Signal(harness.SigStop); err != nil {
			return out, err
		}
		stopped := time.Now()
		select {
		case <-time.After(5 * time.Second):
		case <-run.Proc.Done():
		}
		if err := a.Proc.Signal(harness.SigCont); err != nil {
			return out, err
		}
		rep, err := completes(ctx, run, outDir, r.want, true, out)
		if err != nil {
			return out, err
		}
		taken := 0
		for _, t := range rep.Tasks {
			var lostAt time.Time
			for _, at := range t.Attempts {
				if at.Peer == "a" && at.Outcome != report.OutcomeOK && at.Start.Before(stopped) {
					lostAt = at.End
				}
			}
			if lostAt.IsZero() {
				continue
			}
			taken++
			again := firstOKAfter(&report.Report{Tasks: []report.Task{t}}, stopped, "")
			if d := again.Sub(stopped); d > out.Recover {
				out.Recover = d
			}
		}
		if taken == 0 {
			out.note("a held no lease when it stopped")
			return out, nil
		}
		out.note("%d of a's leases run again, the last %s after the stop", taken, out.Recover.Round(time.Millisecond))
		if out.Recover > 8*time.Second {
			return out, fmt.Errorf("a's leases ran again up to %s after the stop, want about 3 s", out.Recover.Round(time.Millisecond))
		}
		return out, nil
	}
}

var sigstopMDNS = Scenario{
	Name:  "sigstop-mdns",
	Short: true,
	Doc: "Two peers found by mDNS run a 40-task job; one is stopped (SIGSTOP) for 5 s. Its leases must run on the " +
		"other peer soon after the membership declares it failed (recover = stop to the last of them running again; " +
		"asserted within 8 s, about 3 s expected), and the job completes with a clean run's outputs, each task accepted once.",
	run: sigstop(true),
}

var sigstopJoin = Scenario{
	Name:  "sigstop-join",
	Short: true,
	Doc:   "As sigstop-mdns, with the peers named by `--join` and no mDNS.",
	run:   sigstop(false),
}

var partition = Scenario{
	Name: "partition",
	Doc: "Three peers (no mDNS) are introduced to each other by a first job; the second job is given one peer's " +
		"address only (`--join a`), so the submitter knows b and c through gossip alone. c's link to the bridge " +
		"is cut for 20 s (longer than memberlist remembers a dead member) and restored. The job must go on on a and " +
		"b, c's leases must run elsewhere, and after the heal the membership must become one again by itself: c " +
		"takes leases again (recover = link up to c's first accepted task; asserted within 20 s, about 5 s " +
		"expected). The job completes with a clean run's outputs, each task accepted once.",
	run: runPartition,
}

func runPartition(ctx context.Context, e *Env) (out *Outcome, err error) {
	const cut = 20 * time.Second
	r, err := e.start(ctx, setup{name: "partition", job: e.echoJob(120, 500, ""),
		peers: []harness.PeerSpec{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}, {Name: "c", Slots: 1}}})
	if err != nil {
		return nil, err
	}
	defer r.finish(&err)
	out = &Outcome{}
	intro, err := writeSpec(r.dir, "intro", e.echoJob(3, 0, ""))
	if err != nil {
		return nil, err
	}
	if _, err := r.complete(ctx, intro, "intro", harness.SubmitOptions{Args: []string{"--min-peers", "3"}}, nil, true, out); err != nil {
		return out, fmt.Errorf("introducing the peers: %w", err)
	}
	out.Wall, out.Lost = 0, 0
	a, c := r.peer("a"), r.peer("c")
	run, err := r.submit(r.spec, "out", harness.SubmitOptions{Join: []string{a.Addr}, Args: []string{"--min-peers", "3"}})
	if err != nil {
		return nil, err
	}
	outDir := filepath.Join(r.dir, "out")
	if err := testwait.Until(ctx, 30*time.Second, "peer c to finish a task", func() bool { return okOn(progress(outDir), "c") > 0 }); err != nil {
		return out, err
	}
	if err := r.lab.SetLink(ctx, c, false); err != nil {
		return out, err
	}
	e.logf("cut c's link")
	select {
	case <-time.After(cut):
	case <-run.Proc.Done():
		return out, fmt.Errorf("the job ended during the cut\n%s", tailLines(run.Proc.Stderr(), 20))
	}
	if err := r.lab.SetLink(ctx, c, true); err != nil {
		return out, err
	}
	upAt := time.Now()
	e.logf("restored c's link")
	rep, err := completes(ctx, run, outDir, r.want, true, out)
	if err != nil {
		return out, err
	}
	back := firstOKAfter(rep, upAt, "c")
	if back.IsZero() {
		return out, errors.New("c took no lease after the heal: the membership stayed split")
	}
	out.Recover = back.Sub(upAt)
	out.note("c back at work %s after the heal", out.Recover.Round(time.Millisecond))
	if out.Recover > 20*time.Second {
		return out, fmt.Errorf("c took its first lease %s after the heal, want about 5 s", out.Recover.Round(time.Millisecond))
	}
	return out, nil
}

var connFlood = Scenario{
	Name:  "conn-flood",
	Short: true,
	Doc: "1100 idle TCP connections are opened from another host of the LAN to a peer whose open-file limit is " +
		"1024. A job on that peer alone must complete while the connections are open (the peer caps and closes " +
		"connections that never finish their handshake), and once they close, a second job completes on it too, " +
		"both with a clean run's outputs (recover = connections closed to the second job's end).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		// The flood comes from the namespace of a second peer, another
		// host of the LAN; the job is given peer a only.
		r, err := e.start(ctx, setup{name: "flood", job: e.echoJob(8, 50, ""),
			peers: []harness.PeerSpec{{Name: "a", Slots: 2, NoFile: 1024}, {Name: "flooder", Slots: 1}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		a := r.peer("a")
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conns, err := r.lab.Dial(dctx, r.peer("flooder"), a.Addr, 1100)
		cancel()
		if err != nil {
			return nil, err
		}
		closeAll := func() {
			for _, c := range conns {
				c.Close()
			}
			conns = nil
		}
		defer closeAll()
		out = &Outcome{}
		out.note("%d idle connections open", len(conns))
		if _, err := r.complete(ctx, r.spec, "flooded", harness.SubmitOptions{Join: []string{a.Addr}, Args: []string{"--wait-peers", "20s"}}, r.want, true, out); err != nil {
			return out, fmt.Errorf("flooded: %w", err)
		}
		closeAll()
		closed := time.Now()
		if _, err := r.complete(ctx, r.spec, "after", harness.SubmitOptions{Join: []string{a.Addr}, Args: []string{"--wait-peers", "10s"}}, r.want, true, out); err != nil {
			return out, fmt.Errorf("after the flood: %w", err)
		}
		out.Recover = time.Since(closed)
		return out, nil
	},
}

// spotCheckCompletes: with spot checks, a job whose colluding liars are
// caught always completes (a task that can no longer reach a quorum once
// they are excluded is decided by the submitter's own run). Set it to
// false only to study a regression: colluders then accepts exit 3 naming
// a task that failed with "no quorum", as long as no wrong output was
// accepted.
const spotCheckCompletes = true

var colluders = Scenario{
	Name:  "colluders",
	Short: true,
	Doc: "Three peers, two of them colluding liars (`join --fault-lie-rate 1 --fault-lie-collude`), run a 16-task " +
		"job with `verify: {replicas: 3, quorum: 2, spot_check: 0.5}`. Spot checks on the submitter must catch the " +
		"majority: both liars excluded, the honest peer not, and every output equal to a clean run's (lost = " +
		"attempts whose answer was not accepted).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		lie := []string{"--fault-lie-rate", "1", "--fault-lie-collude"}
		r, err := e.start(ctx, setup{name: "collude",
			job: e.echoJob(16, 0, "verify: {replicas: 3, quorum: 2, spot_check: 0.5}\n"), clean: e.echoJob(16, 0, ""),
			peers: []harness.PeerSpec{{Name: "honest", Slots: 1}, {Name: "liar0", Slots: 1, Args: lie}, {Name: "liar1", Slots: 1, Args: lie}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		run, err := r.submit(r.spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "3", "--wait-peers", "20s"}})
		if err != nil {
			return nil, err
		}
		out = &Outcome{}
		outDir := filepath.Join(r.dir, "out")
		sub, err := run.Wait(ctx)
		if sub == nil {
			return out, err
		}
		out.Exit, out.Wall = sub.ExitCode, sub.Wall
		rep := sub.Report
		if rep == nil {
			return out, err
		}
		out.Lost = lost(rep)
		// Today's minimum while a task can still fail with "no quorum"
		// once the liars are excluded (see spotCheckCompletes): exit 3
		// naming it, and no wrong output accepted.
		if sub.ExitCode == 3 && !spotCheckCompletes && rep.State == report.StateFailed {
			var failed []string
			for _, t := range rep.Tasks {
				if t.State == report.TaskFailed {
					failed = append(failed, t.ID)
				}
			}
			if len(failed) == 0 || !strings.Contains(sub.Stderr, "no quorum") {
				return out, fmt.Errorf("exit 3 without a task failed for want of a quorum\n%s", tailLines(sub.Stderr, 20))
			}
			out.note("task(s) %s failed with no quorum after the liars' exclusion (exit 3)", strings.Join(failed, ", "))
		} else if err != nil {
			return out, err
		} else if rep.State != report.StateComplete {
			return out, fmt.Errorf("job %s: %s", rep.State, rep.Error)
		}
		if err := checkReport(rep, outDir, r.want, false); err != nil {
			return out, err
		}
		if excluded(rep, "liar0") == "" || excluded(rep, "liar1") == "" || excluded(rep, "honest") != "" {
			return out, fmt.Errorf("excluded %+v, want liar0 and liar1 only", rep.Excluded)
		}
		for _, x := range rep.Excluded {
			if d := x.Time.Sub(rep.Started); d > out.Recover {
				out.Recover = d
			}
		}
		out.note("liars excluded by %s into the job", out.Recover.Round(time.Millisecond))
		return out, nil
	},
}

var churn = Scenario{
	Name:  "churn",
	Short: true,
	Doc: "Three peers run a 60-task job while, every 2 s, one of them is killed (SIGKILL, three times in turn) " +
		"and started again at the same address. Nothing may be lost: the job completes with a clean run's outputs, " +
		"each task accepted once (recover = the last restart to that peer's first accepted task; lost = attempts " +
		"cut short).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "churn", job: e.echoJob(60, 300, ""),
			peers: []harness.PeerSpec{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}, {Name: "c", Slots: 2}}})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		run, err := r.submit(r.spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "3"}})
		if err != nil {
			return nil, err
		}
		outDir := filepath.Join(r.dir, "out")
		out = &Outcome{}
		var last *harness.LabPeer
		var restarted time.Time
		for i, name := range []string{"a", "b", "c"} {
			select {
			case <-time.After(2 * time.Second):
			case <-run.Proc.Done():
			}
			if done := run.Proc.Done(); isClosed(done) {
				out.note("the job ended after %d kills", i)
				break
			}
			p := r.peer(name)
			p.Proc.Kill()
			if err := r.lab.RestartPeer(ctx, p); err != nil {
				return out, err
			}
			last, restarted = p, time.Now()
		}
		rep, err := completes(ctx, run, outDir, r.want, true, out)
		if err != nil {
			return out, err
		}
		if last != nil {
			if back := firstOKAfter(rep, restarted, last.Name); !back.IsZero() {
				out.Recover = back.Sub(restarted)
				out.note("%s back at work %s after its restart", last.Name, out.Recover.Round(time.Millisecond))
			} else {
				out.note("%s took no task after its restart", last.Name)
			}
		}
		return out, nil
	},
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

var submitterKill = Scenario{
	Name:  "submitter-kill",
	Short: true,
	Doc: "A 30-task job on two peers; once 5 tasks are done the submitter is killed (SIGKILL) and the same job " +
		"is run again into the same folder. The rerun must complete with a clean run's outputs, keep the tasks " +
		"done before the kill (not run them again), and leave no `DATA/submit/<pid>-*` folder of the killed run " +
		"(recover = the rerun's length; lost = tasks run twice and attempts cut short).",
	run: func(ctx context.Context, e *Env) (out *Outcome, err error) {
		r, err := e.start(ctx, setup{name: "subkill", job: e.echoJob(30, 300, ""), peers: twoPeers()})
		if err != nil {
			return nil, err
		}
		defer r.finish(&err)
		spec := r.spec
		outDir := filepath.Join(r.dir, "out")
		run, err := r.submit(spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "2"}})
		if err != nil {
			return nil, err
		}
		out = &Outcome{}
		var before *report.Report
		if err := testwait.Until(ctx, 30*time.Second, "5 tasks done", func() bool {
			before = progress(outDir)
			return before != nil && before.Summary.Done >= 5
		}); err != nil {
			return out, err
		}
		killed, killedAt := run.Proc.Pid(), time.Now()
		run.Proc.Kill()
		sub, _ := run.Wait(ctx)
		if sub != nil {
			out.Wall = sub.Wall
		}
		doneBefore := map[string]string{}
		for _, t := range before.Tasks {
			if t.State == report.TaskDone {
				doneBefore[t.ID] = t.Digest
			}
		}
		run, err = r.submit(spec, "out", harness.SubmitOptions{Args: []string{"--min-peers", "2"}})
		if err != nil {
			return out, err
		}
		wall := out.Wall
		rep, err := completes(ctx, run, outDir, r.want, false, out)
		if err != nil {
			return out, err
		}
		out.Recover = out.Wall - wall
		redone := 0
		for _, t := range rep.Tasks {
			if _, ok := doneBefore[t.ID]; !ok {
				continue
			}
			for _, a := range t.Attempts {
				if a.Outcome == report.OutcomeOK && a.Start.After(killedAt) {
					redone++
				}
			}
		}
		if redone > 0 {
			return out, fmt.Errorf("%d of the %d tasks done before the kill ran again", redone, len(doneBefore))
		}
		out.note("%d tasks done before the kill kept", len(doneBefore))
		entries, err := os.ReadDir(filepath.Join(e.Data, "submit"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return out, err
		}
		for _, d := range entries {
			if strings.HasPrefix(d.Name(), strconv.Itoa(killed)+"-") {
				return out, fmt.Errorf("the killed run's folder %s is still in DATA/submit", d.Name())
			}
		}
		return out, nil
	},
}
