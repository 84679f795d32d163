package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestExecNormalizeReduce runs examples/render.yaml on two peers: every
// band is stamped with its render date, so replicas differ byte for byte.
// Without normalize the vote finds no quorum; with it (the example as
// shipped) every band is accepted on two matching votes, and the exec
// reduce command stitches the bands into one image.
func TestExecNormalizeReduce(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "r1", 2, 2), startPeerOnHost(t, dir, "r2", 3, 2)}
	example := filepath.Join(repoRoot, "examples", "render.yaml")
	body, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	run := func(spec, out string) result {
		return p2pc(t, "run", spec, "--out", out, "--no-mdns", "--no-progress", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers))
	}

	// The same job without its normalize filter (and one band): the
	// replicas' digests differ.
	raw := strings.NewReplacer(
		"  normalize:\n    command: [sed, \"/^# rendered /d\"]\n", "",
		"from: 0, to: 7}", "from: 0, to: 0}",
		"plugin: ../plugins/exec", "plugin: {{repo}}/plugins/exec",
		"  - data/render.sh", "  - {{repo}}/examples/data/render.sh",
		"output: ../out/render\n", "",
	).Replace(string(body))
	if strings.Contains(raw, "normalize:") || strings.Contains(raw, "../") {
		t.Fatal("examples/render.yaml changed: update this test's edit")
	}
	r := run(writeSpec(t, dir, "raw.yaml", raw), filepath.Join(dir, "raw"))
	if r.code == 0 || !strings.Contains(r.stderr, "no quorum") {
		t.Fatalf("without normalize: exit %d, want a failure with \"no quorum\"\n%s", r.code, r.stderr)
	}

	out := filepath.Join(dir, "out")
	r = run(example, out)
	if r.code != 0 {
		t.Fatalf("examples/render.yaml: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	if len(rep.Tasks) != 8 {
		t.Fatalf("%d tasks, want 8", len(rep.Tasks))
	}
	for _, task := range rep.Tasks {
		agree := 0
		for _, v := range task.Votes {
			if v.Digest == task.Digest {
				agree++
			}
		}
		if task.State != "done" || agree < 2 {
			t.Errorf("task %s: %s with %d matching votes (%+v), want done on 2", task.ID, task.State, agree, task.Votes)
		}
	}
	img, err := os.ReadFile(filepath.Join(out, "image.pgm"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(img)), "\n")
	if len(lines) != 3+64 || lines[0] != "P2" || lines[1] != "64 64" || bytes.Contains(img, []byte("rendered")) {
		t.Fatalf("image.pgm is not the 64x64 stitched image without dates (%d lines):\n%.300s", len(lines), img)
	}
	// Row y of the gradient starts with (y*2) % 256: the bands are in order.
	for y := range 64 {
		if first := strings.Fields(lines[3+y])[0]; first != strconv.Itoa(y*2%256) {
			t.Fatalf("image.pgm row %d starts with %s, want %d: bands out of order", y, first, y*2%256)
		}
	}
}
