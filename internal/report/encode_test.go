package report

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func cloneOrNil[S ~[]E, E any](s S) S {
	if s == nil {
		return nil
	}
	return append(S{}, s...)
}

// randomTask makes a task whose fields are set or not, plain or in need
// of escaping, at random.
func randomTask(rng *rand.Rand) Task {
	strs := []string{"", "plain", "host-a", "a \"quoted\" \\ word", "<&>", "tab\there", "line\nbreak", "\x01\x1f", "x\x1fy", "\x7f", "\b\f",
		"é ü", "\u2028\u2029", "bad \xff utf8", "peer@" + "0123456-89ab-cdef-0123-4567-89ab-cdef", "x@y"}
	s := func() string { return strs[rng.IntN(len(strs))] }
	locs := []*time.Location{time.UTC, time.FixedZone("X", 3600+1800), time.FixedZone("Y", -7*3600)}
	tm := func() time.Time {
		switch rng.IntN(5) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
		case 2:
			return time.Date(12000, 1, 2, 3, 4, 5, 6, time.UTC) // beyond RFC 3339: an error
		}
		return time.Date(2000+rng.IntN(50), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9), locs[rng.IntN(len(locs))]).Add(time.Duration(rng.Int64N(1e6)))
	}
	params := []string{`{"i":0}`, `{ "a" : [1, {"b":"<&>"}], "c":{} }`, `[]`, `{}`, `null`, `"s"`, `12`, `{"u":"\u2028"}`, "{\"u\":\"\u2028\"}", `{"a":1,}`, `{"x":"<"}`, ` 1`, ``}
	var task Task
	task.ID = s()
	if rng.IntN(8) > 0 {
		task.Params = json.RawMessage(params[rng.IntN(len(params))])
	}
	task.State, task.Peer, task.PeerID = s(), s(), s()
	if rng.IntN(6) > 0 {
		task.Attempts = []Attempt{}
		for range rng.IntN(3) {
			task.Attempts = append(task.Attempts, Attempt{Peer: s(), PeerID: s(), Start: tm(), End: tm(), Outcome: s(), Error: s(), Device: s(),
				Resumed: rng.IntN(2) == 0, Check: rng.IntN(2) == 0, HandedOver: rng.IntN(2) == 0})
		}
	}
	task.Error, task.Digest, task.Verdict = s(), s(), s()
	if rng.IntN(3) > 0 {
		task.Files = []string{}
		for range rng.IntN(3) {
			task.Files = append(task.Files, s())
		}
	}
	if rng.IntN(3) > 0 {
		task.Votes = []Vote{}
		for range rng.IntN(3) {
			task.Votes = append(task.Votes, Vote{Peer: s(), PeerID: s(), Digest: s()})
		}
	}
	task.Checkpoints = rng.IntN(3) - 1
	task.Reused = rng.IntN(2) == 0
	if rng.IntN(2) == 0 {
		task.Key[0] = 1 // not in report.json
	}
	if rng.IntN(3) > 0 {
		task.Partials = []Partial{}
		for range rng.IntN(3) {
			p := Partial{Time: tm(), Peer: s(), PeerID: s(), Text: s(), Truncated: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				p.Bytes = []byte(s())
			}
			task.Partials = append(task.Partials, p)
		}
	}
	return task
}

// TestAppendTaskMatchesJSON: AppendTask writes encoding/json's bytes, or
// fails where encoding/json fails, for tasks of every shape.
func TestAppendTaskMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2048))
	tasks := []Task{sample().Tasks[0], {}, {Attempts: []Attempt{}}}
	for range 3000 {
		tasks = append(tasks, randomTask(rng))
	}
	for i, task := range tasks {
		before := marshalOrErr(task)
		task2 := task
		task2.Attempts, task2.Votes, task2.Partials = cloneOrNil(task.Attempts), cloneOrNil(task.Votes), cloneOrNil(task.Partials)
		task2.splitPeerIDs()
		b, wantErr := json.MarshalIndent(&task2, taskPrefix, indent)
		want := string(b)
		got, err := AppendTask([]byte("x"), &task)
		switch {
		case wantErr != nil:
			if err == nil {
				t.Fatalf("task %d: encoding/json fails (%v), AppendTask does not:\n%s", i, wantErr, got)
			}
			continue
		case err != nil:
			t.Fatalf("task %d: %v; want\n%s", i, err, want)
		case string(got) != "x"+want:
			t.Fatalf("task %d: AppendTask gives\n%s\nwant\nx%s", i, got, want)
		}
		if after := marshalOrErr(task); after != before {
			t.Fatalf("task %d: AppendTask changed the task", i)
		}
	}
}

func marshalOrErr(task Task) string {
	b, err := json.Marshal(task)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestAppendTaskKnowsEveryField: a field added to Task or its parts must
// be added to AppendTask too (and to randomTask).
func TestAppendTaskKnowsEveryField(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[Task](): 15, reflect.TypeFor[Attempt](): 10, reflect.TypeFor[Vote](): 3, reflect.TypeFor[Partial](): 6,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, AppendTask writes %d: teach AppendTask (encode.go) the new ones", typ, typ.NumField(), n)
		}
	}
}

func BenchmarkAppendTask(b *testing.B) {
	task := sample().Tasks[0]
	task.Partials, task.Votes = nil, nil
	b.Run("AppendTask", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendTask(buf[:0], &task)
		}
	})
	b.Run("MarshalIndent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.MarshalIndent(&task, taskPrefix, indent)
		}
	})
}
