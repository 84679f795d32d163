package report

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sample() *Report {
	at := time.Date(2026, 11, 21, 9, 0, 0, 123e6, time.UTC)
	return &Report{
		Format: Format, JobID: strings.Repeat("ab", 32), Name: "demo", Spec: "job.yaml", State: StateComplete,
		Started: at, Finished: at.Add(2 * time.Second), Node: "host-a",
		Plugin:   Plugin{Path: "/p/plugin", Digest: strings.Repeat("cd", 32), Name: "demo", Version: "1"},
		Summary:  Summary{Total: 1, Done: 1},
		Outputs:  []string{"out.png"},
		Warnings: []string{"w"},
		Excluded: []Exclusion{{Peer: "liar", Reason: "lost 3 votes", Time: at}},
		Peers:    []PeerTrust{{Peer: "liar", Invalid: 3, Excluded: true}},
		Tasks: []Task{{
			ID: "0000", Params: json.RawMessage(`{"band":0}`), State: TaskDone, Peer: "host-a",
			Attempts: []Attempt{{Peer: "host-a", Start: at, End: at.Add(time.Second), Outcome: OutcomeOK, Resumed: true}},
			Digest:   strings.Repeat("ef", 32), Files: TaskFiles("0000", []string{"data", "sub/x.txt"}),
			Votes: []Vote{{Peer: "host-a", Digest: "ef"}}, Verdict: "accepted: 1 of 1 votes agree", Checkpoints: 2,
			Partials: []Partial{{Time: at, Peer: "host-a", Text: "half"}, {Time: at, Peer: "host-a", Bytes: []byte{0xff}, Truncated: true}},
		}},
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sample()
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The same JSON (params come back indented, empty bytes as []).
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("read back\n%s\nwant\n%s", g, w)
	}
	if !got.Started.Equal(want.Started) || got.Tasks[0].Attempts[0] != want.Tasks[0].Attempts[0] {
		t.Errorf("times or attempts differ: %+v", got.Tasks[0].Attempts)
	}
	// Only the report is left: the temp file was renamed.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != FileName {
		t.Errorf("folder holds %v", ents)
	}
	// A rewrite replaces it.
	want.State = StateFailed
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, _ := Read(dir); got.State != StateFailed {
		t.Errorf("rewritten state %q", got.State)
	}
}

// TestFieldNames pins the JSON names docs/report.md documents: scripts
// read them.
func TestFieldNames(t *testing.T) {
	data, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	for _, c := range []struct {
		where string
		got   map[string]any
		want  []string
	}{
		{"report", m, []string{"error", "excluded", "finished", "format", "job_id", "name", "node", "outputs", "peers", "plugin", "spec", "started", "state", "summary", "tasks", "warnings"}},
		{"plugin", m["plugin"].(map[string]any), []string{"digest", "name", "path", "version"}},
		{"summary", m["summary"].(map[string]any), []string{"done", "failed", "reused", "total"}},
		{"task", m["tasks"].([]any)[0].(map[string]any), []string{"attempts", "checkpoints", "digest", "files", "id", "params", "partials", "peer", "state", "verdict", "votes"}},
		{"attempt", m["tasks"].([]any)[0].(map[string]any)["attempts"].([]any)[0].(map[string]any), []string{"end", "outcome", "peer", "resumed", "start"}},
	} {
		want := slices.DeleteFunc(slices.Clone(c.want), func(k string) bool { return k == "error" })
		if got := keys(c.got); !slices.Equal(got, want) {
			t.Errorf("%s keys %v, want %v", c.where, got, want)
		}
	}
	if got := m["started"]; got != "2026-11-21T09:00:00.123Z" {
		t.Errorf("started = %v, want RFC 3339 UTC", got)
	}
	if got := m["tasks"].([]any)[0].(map[string]any)["files"]; !reflect.DeepEqual(got, []any{"tasks/0000/data", "tasks/0000/sub/x.txt"}) {
		t.Errorf("files = %v", got)
	}
}

// TestOmitted: a running job's report leaves out what it does not have
// yet; attempts is always a list.
func TestOmitted(t *testing.T) {
	r := &Report{Format: Format, State: StateRunning, Tasks: []Task{{ID: "a", State: TaskPending, Attempts: []Attempt{}}}}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, k := range []string{`"finished"`, `"error"`, `"outputs"`, `"warnings"`, `"excluded"`, `"peers"`, `"files"`, `"verdict"`, `"votes"`, `"partials"`, `"checkpoints"`} {
		if strings.Contains(s, k) {
			t.Errorf("%s in a running report: %s", k, s)
		}
	}
	if !strings.Contains(s, `"attempts":[]`) {
		t.Errorf("attempts not an empty list: %s", s)
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing report: %v", err)
	}
	for _, c := range []struct{ name, data, want string }{
		{"garbage", "{", "decode report"},
		{"newer format", `{"format": 99}`, "newer than this p2pc"},
	} {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Unknown fields are ignored: fields are only ever added.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format": 1, "later": true, "tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err != nil {
		t.Errorf("unknown field: %v", err)
	}
}

func TestWriteFileAtomicFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
	path := filepath.Join(dir, "f")
	if err := WriteFileAtomic(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stat %v, %v; want mode 0600", fi, err)
	}
}
func TestSplitPeer(t *testing.T) {
	const id = "ze6b-wvbs-zy6k-aeq6-cex7-oow3-6i45"
	tests := []struct{ key, name, id string }{
		{"p1@" + id, "p1", id},
		{"a@b@" + id, "a@b", id},
		{"host", "host", ""},
		{"user@host", "user@host", ""},
		{"p1@" + id[:33], "p1@" + id[:33], ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		n, i := SplitPeer(tc.key)
		if n != tc.name || i != tc.id {
			t.Errorf("SplitPeer(%q) = %q, %q; want %q, %q", tc.key, n, i, tc.name, tc.id)
		}
	}
	r := &Report{Tasks: []Task{{Peer: "p1@" + id, Attempts: []Attempt{{Peer: "p1@" + id}, {Peer: "local"}}, Votes: []Vote{{Peer: "p2@" + id}}}}}
	r.SplitPeerIDs()
	r.SplitPeerIDs() // idempotent
	tk := r.Tasks[0]
	if tk.Peer != "p1" || tk.PeerID != id || tk.Attempts[0].PeerID != id || tk.Attempts[1].Peer != "local" || tk.Votes[0].Peer != "p2" {
		t.Fatalf("%+v", tk)
	}
}

// TestEncodeStreams: Encode writes what json.MarshalIndent would, for no,
// one and many tasks, and for a nil task list.
func TestEncodeStreams(t *testing.T) {
	many := sample()
	for i := range 3 {
		task := many.Tasks[0]
		task.ID = strings.Repeat("x", i+1)
		task.Params = json.RawMessage(`{"a":[1,{"b":"<&>"}],"c":{}}`)
		many.Tasks = append(many.Tasks, task)
	}
	none := sample()
	none.Tasks = []Task{}
	null := sample()
	null.Tasks = nil
	for name, r := range map[string]*Report{"one": sample(), "many": many, "none": none, "nil": null} {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		if err := Encode(&got, r); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want)+"\n" {
			t.Errorf("%s: Encode gives\n%s\nwant\n%s", name, got.String(), want)
		}
	}
}
