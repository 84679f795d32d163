package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/p2pc/p2pc/harness"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/internal/testwait"
)

// A partition heals into one owner (issue 31): the owner of a job handed
// to the swarm is cut off, the other side takes the job over, and after
// the heal one owner remains.

const (
	opTasks  = 240
	opTaskMS = 300
	// opInFlight bounds the tasks the owner's side runs to their end
	// after the cut: its member (one slot) holds a lease and a prefetched
	// one at the cut, and its coordinator leases for at most about a
	// second more (job's leaseStall) before it stops for its journal,
	// which cannot reach the successors: 2 + ceil(1.6 s / 300 ms).
	opInFlight = 8
)

// opNotDurable: a result its member finished this long before the cut
// may not be on the successors yet (a journal snapshot every 200 ms, and
// its copy): in flight at the cut too.
const opNotDurable = time.Second

var ownerPartition = Scenario{
	Name: "owner-partition",
	Doc: "Four members (`p2pc join`, one slot each) run a detached job (`p2pc run --detach`) of 240 tasks of 300 ms. " +
		"Once 30 are done the owner's link is cut for 20 s, then restored. The other side must take the job over " +
		"(epoch 2) during the cut; after the heal one owner remains: every member's record and `p2pc jobs --json` " +
		"asked of each member name the same owner and epoch, and the old owner logs that it stepped down. The job " +
		"completes with a clean run's outputs (fetched), each task accepted once; the tasks run to their end twice " +
		"are at most those the owner's side ran after the cut, and those at most what it held at the cut or leased " +
		"before it stopped for its journal (8) (recover = link up to the old owner's step-down; lost = tasks run twice).",
	run: runOwnerPartition,
}

// opJob is a job as `p2pc jobs --json` prints it (the fields read here).
type opJob struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

func runOwnerPartition(ctx context.Context, e *Env) (out *Outcome, err error) {
	const cut = 20 * time.Second
	var peers []harness.PeerSpec
	for _, n := range []string{"a", "b", "c", "d"} {
		peers = append(peers, harness.PeerSpec{Name: n, Slots: 1, Args: []string{"--log-level", "debug"}})
	}
	r, err := e.start(ctx, setup{name: "ownerpart", job: e.echoJob(opTasks, opTaskMS, ""), peers: peers, joinFirst: true})
	if err != nil {
		return nil, err
	}
	defer r.finish(&err)
	out = &Outcome{}
	stdout, err := r.lab.RunP2PC(ctx, "--data", e.Data, "run", r.spec, "--detach", "--no-mdns", "--join", strings.Join(r.lab.PeerAddrs(), ","))
	if err != nil {
		return out, fmt.Errorf("run --detach: %w", err)
	}
	m := detachedRe.FindStringSubmatch(stdout)
	if m == nil {
		return out, fmt.Errorf("run --detach printed no job and owner:\n%s", stdout)
	}
	id, owner := m[1], r.peer(m[2])
	started := time.Now()
	e.logf("job %.12s owned by %s", id, owner.Name)
	if err := testwait.Until(ctx, 60*time.Second, "30 tasks done", func() bool {
		rec := record(owner, id)
		return rec != nil && rec.Done >= 30
	}); err != nil {
		return out, err
	}

	if err := r.lab.SetLink(ctx, owner, false); err != nil {
		return out, err
	}
	cutAt := time.Now()
	e.logf("cut the owner %s's link", owner.Name)
	var taker *harness.LabPeer
	if err := testwait.Until(ctx, cut, "a member on the other side to take the job over", func() bool {
		taker = newOwner(r.lab.Peers(), owner, id)
		return taker != nil
	}); err != nil {
		return out, err
	}
	out.note("%s took over %s after the cut", taker.Name, time.Since(cutAt).Round(time.Millisecond))
	select {
	case <-time.After(time.Until(cutAt.Add(cut))):
	case <-ctx.Done():
		return out, ctx.Err()
	}
	if rec := record(owner, id); rec == nil || rec.OwnerId == "" || rec.Owner != owner.Name || rec.State != "running" {
		return out, fmt.Errorf("the cut-off owner's record at the end of the cut: %v, want its own, running", rec)
	}
	if err := r.lab.SetLink(ctx, owner, true); err != nil {
		return out, err
	}
	healAt := time.Now()
	e.logf("restored the owner's link")

	// One owner: every member's record names the same owner and epoch,
	// and the old owner says it stepped down.
	var one *pb.Record
	if err := testwait.Until(ctx, 30*time.Second, "every member's record to name one owner, the old owner stepped down", func() bool {
		one = oneOwner(r.lab.Peers(), id)
		return one != nil && one.Owner != owner.Name && steppedDownRe.MatchString(owner.Proc.Stderr())
	}); err != nil {
		return out, fmt.Errorf("%w\n%s", err, records(r.lab.Peers(), id))
	}
	out.Recover = time.Since(healAt)
	out.note("one owner %s (epoch %d) %s after the heal", one.Owner, one.Epoch, out.Recover.Round(time.Millisecond))
	if err := testwait.Until(ctx, 90*time.Second, "the job to complete", func() bool {
		rec := record(taker, id)
		return rec != nil && rec.State == "complete"
	}); err != nil {
		return out, fmt.Errorf("%w\n%s", err, records(r.lab.Peers(), id))
	}
	out.Wall = time.Since(started)
	if one = oneOwner(r.lab.Peers(), id); one == nil || one.Owner == owner.Name || one.Epoch < 2 {
		return out, fmt.Errorf("after the end the members' records disagree or name the old owner:\n%s", records(r.lab.Peers(), id))
	}
	for _, p := range r.lab.Peers() {
		j, err := r.listed(ctx, p, id)
		if err != nil {
			return out, err
		}
		if j.Owner != one.Owner || j.Epoch != one.Epoch || j.State != "complete" || j.Done != opTasks {
			return out, fmt.Errorf("p2pc jobs asked of %s: %+v, want owner %s epoch %d, complete", p.Name, j, one.Owner, one.Epoch)
		}
	}

	fetched := filepath.Join(r.dir, "fetched")
	if _, err := r.lab.RunP2PC(ctx, "--data", filepath.Join(r.dir, "fetcher"), "fetch", id[:12], "--out", fetched, "--no-mdns", "--join", owner.Addr); err != nil {
		return out, err
	}
	rep, err := harness.ReadReport(fetched)
	if err != nil {
		return out, err
	}
	if err := checkReport(rep, fetched, r.want, true); err != nil {
		return out, fmt.Errorf("the fetched report: %w", err)
	}
	if len(rep.Tasks) != opTasks || rep.State != "complete" {
		return out, fmt.Errorf("fetched report: %s with %d tasks, want complete with %d", rep.State, len(rep.Tasks), opTasks)
	}

	twice, near := ranTwice(r.lab.Peers(), owner, cutAt.Add(-opNotDurable))
	after := 0
	for _, at := range near {
		if at.After(cutAt) {
			after++
		}
	}
	out.Lost = len(twice)
	out.note("%d tasks ran to their end twice; the owner's side ran %d after the cut", len(twice), after)
	var unexplained []string
	for t, on := range twice {
		if _, ok := near[t]; !ok {
			unexplained = append(unexplained, fmt.Sprintf("%s (on %v)", t, on))
		}
	}
	switch {
	case len(unexplained) > 0:
		return out, fmt.Errorf("tasks ran twice that the owner's side did not have in flight at the cut: %v", unexplained)
	case after > opInFlight:
		return out, fmt.Errorf("the owner's side ran %d tasks to their end after the cut, want at most %d (held at the cut, or leased before it stopped leasing); its log from the cut:\n%s",
			after, opInFlight, logSince(owner.Proc.Stderr(), cutAt.Add(-opNotDurable), 60))
	}
	return out, nil
}

var steppedDownRe = regexp.MustCompile(`stepping down|taken over while it was away`)

// record is peer p's record of job id (nil: none, or unreadable).
func record(p *harness.LabPeer, id string) *pb.Record {
	b, err := os.ReadFile(filepath.Join(p.Data, "jobs", id, "record.json"))
	if err != nil {
		return nil
	}
	r := &pb.Record{}
	if protojson.Unmarshal(b, r) != nil {
		return nil
	}
	return r
}

// newOwner is the member other than old whose record says it owns job id
// at a higher epoch than 1 (nil: none yet).
func newOwner(ps []*harness.LabPeer, old *harness.LabPeer, id string) *harness.LabPeer {
	for _, p := range ps {
		if r := record(p, id); p != old && r != nil && r.Epoch >= 2 && r.Owner == p.Name {
			return p
		}
	}
	return nil
}

// oneOwner is the record the members holding one of job id agree on
// (owner and epoch); nil if they do not.
func oneOwner(ps []*harness.LabPeer, id string) *pb.Record {
	var one *pb.Record
	for _, p := range ps {
		r := record(p, id)
		switch {
		case r == nil:
		case one == nil:
			one = r
		case r.Owner != one.Owner || r.Epoch != one.Epoch:
			return nil
		}
	}
	return one
}

// records says what each member's record of job id holds, for errors.
func records(ps []*harness.LabPeer, id string) string {
	var b strings.Builder
	for _, p := range ps {
		if r := record(p, id); r != nil {
			fmt.Fprintf(&b, "%s: owner %s epoch %d %s %d/%d\n", p.Name, r.Owner, r.Epoch, r.State, r.Done, r.Total)
		} else {
			fmt.Fprintf(&b, "%s: no record\n", p.Name)
		}
	}
	return b.String()
}

// listed is job id as `p2pc jobs --json` asked of member p lists it.
func (r *labRun) listed(ctx context.Context, p *harness.LabPeer, id string) (opJob, error) {
	stdout, err := r.lab.RunP2PC(ctx, "jobs", "--json", "--no-mdns", "--join", p.Addr)
	if err != nil {
		return opJob{}, err
	}
	var js []opJob
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		return opJob{}, fmt.Errorf("p2pc jobs --json asked of %s: %w\n%s", p.Name, err, stdout)
	}
	for _, j := range js {
		if j.ID == id {
			return j, nil
		}
	}
	return opJob{}, fmt.Errorf("p2pc jobs --json asked of %s does not list job %.12s:\n%s", p.Name, id, stdout)
}

var (
	taskRanRe = regexp.MustCompile(`(?m)^time=(\S+) .*msg="task ran" .*coordinator=(\S+) task=(\S+) .*outcome=ok`)
	backupRe  = regexp.MustCompile(`msg="backup copy of a straggler" .*task=(\S+)`)
)

// ranTwice reads the members' logs: the tasks run to their end (ok) more
// than once, but for backup copies of stragglers a coordinator leased on
// purpose, with where and when each run ended; and when member side ran
// each task it ran to its end after at for its own coordinator (the old
// owner's: after the heal it runs tasks for the new one too).
func ranTwice(ps []*harness.LabPeer, side *harness.LabPeer, at time.Time) (twice map[string][]string, after map[string]time.Time) {
	runs, backups := map[string][]string{}, map[string]bool{}
	after = map[string]time.Time{}
	for _, p := range ps {
		log := p.Proc.Stderr()
		for _, m := range taskRanRe.FindAllStringSubmatch(log, -1) {
			task := m[3]
			runs[task] = append(runs[task], p.Name+"@"+m[1]+" for "+m[2])
			if t, err := time.Parse(time.RFC3339Nano, m[1]); p == side && m[2] == side.Name && err == nil && t.After(at) {
				after[task] = t
			}
		}
		for _, m := range backupRe.FindAllStringSubmatch(log, -1) {
			backups[m[1]] = true
		}
	}
	twice = map[string][]string{}
	for t, on := range runs {
		if len(on) > 1 && !backups[t] {
			twice[t] = on
		}
	}
	return twice, after
}

var logTimeRe = regexp.MustCompile(`^time=(\S+) `)

// logSince is up to n lines of log from at on (but the plugins' own).
func logSince(log string, at time.Time, n int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		m := logTimeRe.FindStringSubmatch(l)
		if m == nil || strings.Contains(l, "component=plugin") {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && !t.Before(at) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
