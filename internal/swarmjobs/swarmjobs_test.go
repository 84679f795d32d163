package swarmjobs

import (
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

func found(ids ...string) []*Found {
	var out []*Found
	for _, id := range ids {
		out = append(out, &Found{Record: &pb.Record{Id: id, Name: "n" + id[:2]}})
	}
	return out
}

func TestPick(t *testing.T) {
	a := strings.Repeat("a", 64)
	ab := "ab" + strings.Repeat("0", 62)
	c := strings.Repeat("c", 64)
	jobs := found(a, ab, c)
	tests := []struct {
		prefix, want, err string
	}{
		{"c", c, ""},
		{"AB", ab, ""},
		{a, a, ""}, // a full ID wins even where it prefixes nothing else
		{"aa", a, ""},
		{"a", "", "ambiguous"},
		{"d", "", "no job of the swarm"},
		{"", "", "give a job ID"},
	}
	for _, tc := range tests {
		f, err := Pick(jobs, tc.prefix)
		switch {
		case tc.err != "":
			if !errors.Is(err, ErrNoJob) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Pick(%q) = %v, want an ErrNoJob saying %q", tc.prefix, err, tc.err)
			}
		case err != nil || f.Record.Id != tc.want:
			t.Errorf("Pick(%q) = %v, %v; want %s", tc.prefix, f, err, tc.want)
		}
	}
}

func TestNewer(t *testing.T) {
	run := &pb.Record{Epoch: 1, State: StateRunning, Done: 5}
	tests := []struct {
		name string
		a, b *pb.Record
		want bool
	}{
		{"higher epoch wins over an ended record", &pb.Record{Epoch: 2, State: StateRunning}, &pb.Record{Epoch: 1, State: StateComplete, Done: 9}, true},
		{"lower epoch loses", &pb.Record{Epoch: 1, State: StateComplete}, &pb.Record{Epoch: 2, State: StateRunning}, false},
		{"ended over running", &pb.Record{Epoch: 1, State: StateCanceled}, run, true},
		{"more progress", &pb.Record{Epoch: 1, State: StateRunning, Done: 6}, run, true},
		{"same is not newer", run, run, false},
	}
	for _, tc := range tests {
		if got := Newer(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Newer = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRankSameEverywhere(t *testing.T) {
	ms := []Member{{Name: "a", ID: "ida"}, {Name: "b", ID: "idb"}, {Name: "c", ID: "idc"}, {Name: "d", ID: "idd"}}
	r1 := Rank("job1", ms)
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	if r2 := Rank("job1", rev); !slices.Equal(r1, r2) {
		t.Errorf("rank depends on the order members are listed in: %v vs %v", r1, r2)
	}
	// Over many jobs every member is first sometimes: the owners spread.
	first := map[string]int{}
	for i := range 200 {
		first[Rank(strings.Repeat("j", i+1), ms)[0].Name]++
	}
	for _, m := range ms {
		if first[m.Name] < 20 {
			t.Errorf("member %s owns %d of 200 jobs: %v", m.Name, first[m.Name], first)
		}
	}
	// Dropping a member moves only the jobs it ranked first.
	for i := range 200 {
		id := strings.Repeat("j", i+1)
		before := Rank(id, ms)[0]
		after := Rank(id, ms[1:])[0]
		if before.Name != "a" && before != after {
			t.Fatalf("job %d moved from %s to %s when a left", i, before.Name, after.Name)
		}
	}
}

// stream replays msgs as a Recv function.
func stream(msgs ...*pb.Bundle) func() (*pb.Bundle, error) {
	return func() (*pb.Bundle, error) {
		if len(msgs) == 0 {
			return nil, io.EOF
		}
		m := msgs[0]
		msgs = msgs[1:]
		return m, nil
	}
}

func fileMsgs(path string, data []byte, sum []byte) []*pb.Bundle {
	if sum == nil {
		s := sha256.Sum256(data)
		sum = s[:]
	}
	return []*pb.Bundle{
		{Msg: &pb.Bundle_File{File: &pb.FileHead{Path: path, Size: int64(len(data)), Sha256: sum, Mode: 0o644}}},
		{Msg: &pb.Bundle_Data{Data: data}},
	}
}

func TestReceiveChecks(t *testing.T) {
	tests := []struct {
		name string
		msgs []*pb.Bundle
		err  string
	}{
		{"whole", append(fileMsgs("a/b.txt", []byte("hello"), nil), fileMsgs("c", nil, nil)...), ""},
		{"escapes", fileMsgs("../x", []byte("x"), nil), "bad file head"},
		{"absolute", fileMsgs("/etc/x", []byte("x"), nil), "bad file head"},
		{"wrong digest", fileMsgs("x", []byte("x"), make([]byte, 32)), "do not match"},
		{"short", fileMsgs("x", []byte("x"), nil)[:1], "missing"},
		{"second header", []*pb.Bundle{{Msg: &pb.Bundle_Header{Header: &pb.Header{}}}}, "second header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out")
			err := intoDir(stream(tc.msgs...), dst)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(filepath.Join(dst, "a", "b.txt")); string(b) != "hello" {
					t.Errorf("a/b.txt = %q", b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 0 {
				t.Errorf("a refused copy left %v", ents)
			}
		})
	}
}

// TestSweepRetain: --retain lets ended jobs go after their end and copies
// of jobs whose end never came after their creation; a running job this
// member owns stays however old.
func TestSweepRetain(t *testing.T) {
	s, err := New(Config{Dir: t.TempDir(), Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	add := func(id string, owned bool, state string, created, ended time.Time) {
		dir := s.jobDir(id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r := &pb.Record{Id: id, State: state, CreatedMs: created.UnixMilli()}
		if !ended.IsZero() {
			r.EndedMs = ended.UnixMilli()
		}
		s.jobs[id] = &entry{rec: r, dir: dir, owned: owned}
	}
	id := func(c string) string { return strings.Repeat(c, 64) }
	add(id("a"), false, StateComplete, t0.Add(-3*time.Hour), t0.Add(-2*time.Hour)) // ended long ago: goes
	add(id("b"), false, StateComplete, t0.Add(-3*time.Hour), t0.Add(-time.Minute)) // ended lately: stays
	add(id("c"), false, StateRunning, t0.Add(-2*time.Hour), time.Time{})           // a copy whose end never came: goes
	add(id("d"), true, StateRunning, t0.Add(-2*time.Hour), time.Time{})            // owned and running: stays
	s.sweep(t0)
	for c, want := range map[string]bool{"a": false, "b": true, "c": false, "d": true} {
		_, kept := s.jobs[id(c)]
		_, err := os.Stat(s.jobDir(id(c)))
		if kept != want || (err == nil) != want {
			t.Errorf("job %s: kept %v, folder there %v; want %v", c, kept, err == nil, want)
		}
	}
}

func TestFirstLive(t *testing.T) {
	alive := func(names ...string) func(string) bool {
		return func(h string) bool { return slices.Contains(names, h) }
	}
	for _, c := range []struct {
		holders []string
		alive   func(string) bool
		want    string
	}{
		{[]string{"a", "b"}, alive("a", "b"), "a"},
		{[]string{"a", "b"}, alive("b"), "b"},
		{[]string{"a", "self"}, alive(), "self"},
		{[]string{"a", "b"}, alive(), ""},
	} {
		if got := firstLive(c.holders, c.alive, "self"); got != c.want {
			t.Errorf("firstLive(%v) = %q, want %q", c.holders, got, c.want)
		}
	}
}

// TestMergeState: a journal copy merges into the state folder: files
// already there stay, a new job.db replaces the old one, and a copy that
// fails its digest changes nothing.
func TestMergeState(t *testing.T) {
	dst := filepath.Join(t.TempDir(), stateDir)
	var mu sync.Mutex
	first := append(fileMsgs("tasks/1/data", []byte("one"), nil), fileMsgs(journalFile, []byte("db1"), nil)...)
	if err := mergeInto(stream(first...), dst, &mu); err != nil {
		t.Fatal(err)
	}
	second := append(fileMsgs(journalFile, []byte("db2"), nil), fileMsgs("tasks/2/data", []byte("two"), nil)...)
	if err := mergeInto(stream(second...), dst, &mu); err != nil {
		t.Fatal(err)
	}
	bad := append(fileMsgs("tasks/3/data", []byte("three"), nil), fileMsgs(journalFile, []byte("db3"), make([]byte, 32))...)
	if err := mergeInto(stream(bad...), dst, &mu); err == nil {
		t.Fatal("a copy with a wrong digest was merged")
	}
	for rel, want := range map[string]string{"tasks/1/data": "one", "tasks/2/data": "two", journalFile: "db2"} {
		if b, err := os.ReadFile(filepath.Join(dst, rel)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "tasks/3")); err == nil {
		t.Error("a file of the refused copy was merged")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".state.tmp-*")); len(left) > 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}
