package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestAttemptsNamed: a verified job's summary names the attempts of a
// failed task by kind, so that `retries: 0` with two attempts reads as a
// try and a replica, and its `ran on:` names the replicas that agreed
// with the accepted results, not only the peers that produced them.
func TestAttemptsNamed(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "ra", 2, 1, "--no-mdns"), startPeerOnHost(t, dir, "rb", 3, 1, "--no-mdns")}
	failing := writeSpec(t, dir, "f.yaml", `
name: failing
plugin: {{repo}}/plugins/echo
params: {fail: true, sleep_ms: 500}
retries: 0
verify: {replicas: 2}
tasks:
  - {id: "1"}
`)
	r := p2pc(t, "run", failing, "--out", filepath.Join(dir, "f"), "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers), "--no-progress")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	want := regexp.MustCompile(`task 1 failed after 2 attempts: 1 try \+ 1 (replica running alongside|stopped once not needed); attempt \d on r[ab]: `)
	if !want.MatchString(r.stderr) {
		t.Errorf("the summary does not name the attempts (%s):\n%s", want, r.stderr)
	}

	agree := writeSpec(t, dir, "a.yaml", `
name: agree
plugin: {{repo}}/plugins/echo
verify: {replicas: 2}
tasks:
  - range: {param: n, from: 0, to: 5}
`)
	r = p2pc(t, "run", agree, "--out", filepath.Join(dir, "a"), "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers), "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	line := regexp.MustCompile(`(?m)^  ran on: (.*); replicas that agreed: (.*)$`).FindStringSubmatch(r.stderr)
	if line == nil {
		t.Fatalf("ran on: names no replicas:\n%s", r.stderr)
	}
	share := regexp.MustCompile(`(r[ab]) (\d+)`)
	total := map[string]int{}
	for _, part := range line[1:] {
		sum := 0
		for _, m := range share.FindAllStringSubmatch(part, -1) {
			n, _ := strconv.Atoi(m[2])
			total[m[1]] += n
			sum += n
		}
		if sum != 6 {
			t.Errorf("%q counts %d tasks, want 6", part, sum)
		}
	}
	if total["ra"] != 6 || total["rb"] != 6 {
		t.Errorf("each peer ran a replica of each of the 6 tasks, but the summary says %v:\n%s", total, r.stderr)
	}
}
