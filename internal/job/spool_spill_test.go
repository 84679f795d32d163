package job

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// TestSpoolSpills: a spool of several MiB of text holds one chunk of it
// in memory, the rest in its file, and yields every task's text as
// report.AppendTask gives it, byte for byte, the tasks decided in any
// order (the window over the file moves back and forth) and some longer
// than a chunk; it leaves no file in the output folder.
func TestSpoolSpills(t *testing.T) {
	const n = 6000
	dir := t.TempDir()
	tasks := doneTasks(n)
	for i := 7; i < n; i += 2500 {
		tasks[i].State, tasks[i].Error = report.TaskFailed, strings.Repeat("x", spoolChunk+i)
	}
	rs := &records{kind: make([]uint8, n), spool: newSpool(dir, n)}
	defer rs.spool.close()
	held := 0
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		rs.spool.put(i, &tasks[i])
		rs.kind[i] = recCold
		held = max(held, cap(rs.spool.buf))
	}
	if !rs.spool.covers(rs) {
		t.Fatal("the spool is off or does not cover the job")
	}
	if held > spoolChunk+2*spoolChunk+n || rs.spool.spilled < 4*spoolChunk {
		t.Fatalf("the spool held up to %d bytes in memory and %d in its file: want one chunk in memory, the rest in the file", held, rs.spool.spilled)
	}
	if cap(rs.spool.buf) > spoolChunk {
		t.Fatalf("after the puts the spool holds %d bytes in memory, want at most %d", cap(rs.spool.buf), spoolChunk)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("the spool left %v in the output folder", left)
	}
	checkSpoolTexts(t, rs, tasks)
}

// TestSpoolOffWithoutFile: a spool that cannot make its file turns off
// (report.json is then read back from the job database), rather than
// holding the text in memory or yielding part of it.
func TestSpoolOffWithoutFile(t *testing.T) {
	const n = 4000
	dir := filepath.Join(t.TempDir(), "gone")
	rs := &records{kind: make([]uint8, n), spool: newSpool(dir, n)}
	for i := range n {
		id := strconv.Itoa(i)
		rs.spool.put(i, &report.Task{ID: id, State: report.TaskDone, Digest: strings.Repeat("ab", 300), Attempts: []report.Attempt{}})
		rs.kind[i] = recCold
	}
	if rs.spool.covers(rs) || rs.spool.buf != nil {
		t.Fatalf("a spool that could not write its file covers the job (%d bytes in memory)", cap(rs.spool.buf))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the spool made its folder: %v", err)
	}
}

// TestSpoolReadsInWindows: tasks decided in a swarm's order (leased
// in batches of consecutive tasks to 512 slots, the batches in flight at
// once settled in any order) are read back at the end through windows
// that each serve many tasks: not a MiB read per batch, not more than
// a few times the file's bytes in all.
func TestSpoolReadsInWindows(t *testing.T) {
	const n, batch, inFlight = 32000, 8, 512 * 8
	dir := t.TempDir()
	tasks := doneTasks(n)
	rs := &records{kind: make([]uint8, n), spool: newSpool(dir, n)}
	defer rs.spool.close()
	rng := rand.New(rand.NewPCG(3, 4))
	for lo := 0; lo < n; lo += inFlight {
		for _, b := range rng.Perm(min(inFlight, n-lo) / batch) {
			for j := range batch {
				i := lo + b*batch + j
				rs.spool.put(i, &tasks[i])
				rs.kind[i] = recCold
			}
		}
	}
	if !rs.spool.covers(rs) || rs.spool.spilled < 8*spoolChunk {
		t.Fatalf("the spool covers the job: %v, spilled %d bytes: want covered, 8 chunks or more", rs.spool.covers(rs), rs.spool.spilled)
	}
	checkSpoolTexts(t, rs, tasks)
	t.Logf("read %d bytes back for %d in the file", rs.spool.read, rs.spool.spilled)
	if rs.spool.read > 8*rs.spool.spilled {
		t.Fatalf("each read %d bytes back for %d in the file, want at most 8 times as many", rs.spool.read, rs.spool.spilled)
	}
}

// checkSpoolTexts checks that the spool yields every task's text as
// report.AppendTask gives it, byte for byte, in task order.
func checkSpoolTexts(t *testing.T, rs *records, tasks []report.Task) {
	t.Helper()
	i := 0
	var want []byte
	err := rs.spool.each(rs)(func(raw []byte) error {
		var err error
		if want, err = report.AppendTask(want[:0], jobdb.AsStored(&tasks[i])); err != nil {
			return err
		}
		if string(raw) != string(want) {
			t.Fatalf("task %d's text from the spool:\n%.300s\nwant:\n%.300s", i, raw, want)
		}
		i++
		return nil
	})
	if err != nil || i != len(tasks) {
		t.Fatalf("each yielded %d of %d texts: %v", i, len(tasks), err)
	}
}
