package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	"github.com/p2pc/p2pc/internal/testwait"
)

// treeOf reads the regular files under dir (but an output folder's lock)
// by slash-separated relative path.
func treeOf(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || d.Name() == dirlock.FileName {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out
}

// sameTree fails unless the folders a and b hold the same files, byte
// for byte.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	ta, tb := treeOf(t, a), treeOf(t, b)
	if len(ta) == 0 {
		t.Fatalf("%s holds no file", a)
	}
	for p, x := range ta {
		if y, ok := tb[p]; !ok || !bytes.Equal(x, y) {
			t.Errorf("%s: in %s (%d bytes) and %s (%d bytes, there %v) differ", p, a, len(x), b, len(y), ok)
		}
	}
	for p := range tb {
		if _, ok := ta[p]; !ok {
			t.Errorf("%s: in %s only", p, b)
		}
	}
}

// waitResultsOn waits until the swarm (asked through p) lists job id's
// output folder on members for which ok holds, and returns them sorted.
func waitResultsOn(t *testing.T, p *peer, id, what string, ok func(on []string) bool) []string {
	t.Helper()
	var on []string
	testwait.For(t, 90*time.Second, fmt.Sprintf("job %s's output on %s", id[:12], what), func() bool {
		for _, j := range swarmJobs(t, p) {
			if j.ID == id {
				on = slices.Sorted(slices.Values(j.ResultsOn))
				return ok(on)
			}
		}
		return false
	})
	return on
}

// checkJobsJSONKeys fails unless `p2pc jobs --json` gives job id the
// keys scripts rely on (issue 31), with a state of the four.
func checkJobsJSONKeys(t *testing.T, p *peer, id string) {
	t.Helper()
	r := p2pc(t, "jobs", "--json", "--no-mdns", "--join", p.addr)
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &jobs); r.code != 0 || err != nil {
		t.Fatalf("jobs --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	for _, j := range jobs {
		if j["id"] != id {
			continue
		}
		for _, k := range []string{"id", "name", "state", "owner", "submitter", "done", "total"} {
			if v, ok := j[k]; !ok || v == "" {
				t.Errorf("jobs --json: key %q missing or empty in %v", k, j)
			}
		}
		if st, _ := j["state"].(string); !slices.Contains([]string{"running", "complete", "failed", "canceled"}, st) {
			t.Errorf("jobs --json: state %q", st)
		}
		return
	}
	t.Errorf("jobs --json does not list job %s:\n%s", id[:12], r.stdout)
}

// TestOutputCopiesKept: an ended job's output folder is on three members
// (owner and two holders); a holder killed for good loses its copy and
// the keeper makes it again on the spare member, byte for byte; a fetch
// by another node changes nothing, and once the submitter fetched the
// job every copy but the keeper's (the first holder in the job's rank,
// normally the owner) is dropped.
func TestOutputCopiesKept(t *testing.T) {
	dir := t.TempDir()
	var peers []*peer
	for i := range 4 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("k%d", i), i+2, 1, "--copy-lost-after", "1s", "--log-level", "info"))
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range peers {
			for _, l := range strings.Split(p.proc.Stderr(), "\n") {
				if strings.Contains(l, "swarmjobs") {
					t.Logf("%s: %s", p.name, l)
				}
			}
		}
	})
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "kept", 1, 6))
	id, owner := detachJob(t, spec, peers)
	ownerPeer := peerNamed(peers, owner)
	waitJobState(t, ownerPeer, id, "complete", 90*time.Second)
	first := waitResultsOn(t, ownerPeer, id, "three members", func(on []string) bool { return len(on) == 3 })
	checkJobsJSONKeys(t, ownerPeer, id)
	if !slices.Contains(first, owner) {
		t.Fatalf("output on %v, not on its owner %s", first, owner)
	}
	var victim, spare *peer
	for _, p := range peers {
		switch {
		case !slices.Contains(first, p.name):
			spare = p
		case p.name != owner && victim == nil:
			victim = p
		}
	}
	ownerOut := filepath.Join(ownerPeer.data, "jobs", id, "out")
	victim.proc.Kill()
	again := waitResultsOn(t, ownerPeer, id, "three members, the spare's among them, the victim's not", func(on []string) bool {
		return len(on) == 3 && slices.Contains(on, spare.name) && !slices.Contains(on, victim.name)
	})
	t.Logf("output on %v; %s killed; now on %v", first, victim.name, again)
	sameTree(t, ownerOut, filepath.Join(spare.data, "jobs", id, "out"))

	// Another node identity fetches: the copies stay.
	out := filepath.Join(dir, "stranger-out")
	if r := p2pcEnv(t, nil, "--data", filepath.Join(dir, "stranger"), "fetch", id[:12], "--out", out, "--no-mdns", "--join", spare.addr); r.code != 0 || strings.Contains(r.stderr, "keeps one copy") {
		t.Fatalf("fetch by a stranger: exit %d\n%s", r.code, r.stderr)
	}
	sameTree(t, ownerOut, out)
	checkOnce(t, readReport(t, out))

	// The submitter fetches: one copy stays, the owner's.
	out = filepath.Join(dir, "submitter-out")
	r := p2pc(t, "fetch", id[:12], "--out", out, "--no-mdns", "--join", spare.addr)
	if r.code != 0 || !strings.Contains(r.stderr, "keeps one copy") {
		t.Fatalf("fetch by the submitter: exit %d\n%s", r.code, r.stderr)
	}
	sameTree(t, ownerOut, out)
	// The copy kept is the first holder's in the job's rank: the owner's,
	// unless a member the submitter did not see ranks above it.
	var holders []swarmjobs.Member
	for _, name := range again {
		p := peerNamed(peers, name)
		m := idRe.FindStringSubmatch(p.proc.Stdout())
		if m == nil {
			t.Fatalf("%s printed no node ID:\n%s", name, p.proc.Stdout())
		}
		holders = append(holders, swarmjobs.Member{Name: name, ID: m[3]})
	}
	keeper := swarmjobs.Rank(id, holders)[0].Name
	kept := waitResultsOn(t, spare, id, "one member", func(on []string) bool { return len(on) == 1 })
	if j := waitJobState(t, spare, id, "complete", 10*time.Second); !j.Fetched {
		t.Errorf("jobs --json after the submitter's fetch: fetched false")
	}
	if kept[0] != keeper || keeper != owner {
		t.Logf("kept on %s, first in rank %s, owner %s", kept[0], keeper, owner)
	}
	if kept[0] != keeper {
		t.Errorf("after the submitter's fetch the output stays on %v, want on %s, the first holder in the job's rank", kept, keeper)
	}
	for _, p := range peers {
		if p == victim || p.name == keeper {
			continue
		}
		for _, sub := range []string{"out", "bundle"} {
			if _, err := os.Stat(filepath.Join(p.data, "jobs", id, sub)); err == nil {
				t.Errorf("%s still keeps the job's %s", p.name, sub)
			}
		}
	}
	// Any member still lists the job, and a fetch from the copy kept works.
	if j := waitJobState(t, spare, id, "complete", 10*time.Second); j.Done != 6 {
		t.Errorf("jobs --json after the drop: %+v", j)
	}
	if r := p2pc(t, "fetch", id[:12], "--out", filepath.Join(dir, "again"), "--no-mdns", "--join", spare.addr); r.code != 0 {
		t.Fatalf("fetch after the drop: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDiskCapRefusesCopy: a member at its --disk cap refuses a copy of a
// job with a one-line reason the submitter sees; the job goes to the
// other members and completes, and nothing of it lands on the capped one.
func TestDiskCapRefusesCopy(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{
		startPeerOnHost(t, dir, "q0", 2, 1),
		startPeerOnHost(t, dir, "q1", 3, 1, "--disk", "4KiB"),
		startPeerOnHost(t, dir, "q2", 4, 1),
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "capped", 1, 4))
	r := p2pc(t, "run", spec, "--detach", "--no-mdns", "--join", addrs(peers))
	m := detachedRe.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("run --detach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id, owner := m[1], m[2]
	if owner == "q1" {
		t.Fatalf("the member at its disk cap owns the job")
	}
	if !strings.Contains(r.stderr, "member q1 is at its disk cap") || !strings.Contains(r.stderr, "p2pc join --disk") {
		t.Errorf("run --detach did not say that q1 refused for its cap:\n%s", r.stderr)
	}
	j := waitJobState(t, peerNamed(peers, owner), id, "complete", 90*time.Second)
	if slices.Contains(j.Holders, "q1") || slices.Contains(j.ResultsOn, "q1") || len(j.Holders) != 1 {
		t.Errorf("copies: holders %v, output on %v; want one holder, never q1", j.Holders, j.ResultsOn)
	}
	// The owner, which sent the output copies, says so in its log.
	waitStderr(t, peerNamed(peers, owner).proc, regexp.MustCompile(`member did not take a copy.*member=q1.*member q1 is at its disk cap`))
	if _, err := os.Stat(filepath.Join(peers[1].data, "jobs", id)); err == nil {
		t.Errorf("the member at its cap keeps a folder of the job")
	}
	if r := p2pc(t, "jobs", "--no-mdns", "--join", peers[1].addr); r.code != 0 || !strings.Contains(r.stdout, "q1") || !strings.Contains(r.stdout, "4 KiB") {
		t.Errorf("jobs does not show q1's cap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
