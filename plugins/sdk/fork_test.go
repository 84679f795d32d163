package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// sumTask spawns one child per element of its params' xs and sums the
// children's results; a task without xs returns its own x.
type sumTask struct{}

func (sumTask) Run(ctx context.Context, req *Request, host Host) (*Result, error) {
	var p struct {
		X  int   `json:"x"`
		Xs []int `json:"xs"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if len(p.Xs) == 0 {
		return &Result{Data: []byte(itoa(p.X))}, nil
	}
	var fs []Future
	for _, x := range p.Xs {
		fs = append(fs, Spawn(ctx, map[string]int{"x": x}))
	}
	if err := host.Checkpoint(ctx, []byte("saved")); err != nil && !errors.Is(err, ErrUnsupported) {
		return nil, err
	}
	if err := Wait(ctx, fs...); err != nil {
		return nil, err
	}
	if st, ok, err := host.Resume(ctx); err != nil || !ok || string(st) != "saved" {
		return nil, errors.New("no checkpoint back")
	}
	sum := 0
	for _, f := range fs {
		c, err := f.Result()
		if err != nil {
			return nil, err
		}
		var n int
		if err := c.Decode(&n); err != nil {
			return nil, err
		}
		sum += n
	}
	return &Result{Data: []byte(itoa(sum))}, nil
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// writeInput writes data into dir/name's base and returns it as an input.
func writeInput(t *testing.T, dir, name string, data []byte) File {
	t.Helper()
	path := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return File{Name: name, Path: path}
}

// A parent's first call suspends with its children's params and its
// checkpoint; its second, given their results, sums them.
func TestForkSuspendResume(t *testing.T) {
	dir := t.TempDir()
	state, _ := json.Marshal(pluginpb.ForkState{Task: "p", Depth: 0})
	req := &Request{TaskID: "p", Params: json.RawMessage(`{"xs":[2,3]}`), WorkDir: dir,
		Inputs: []File{{Name: "other", Path: "/x"}, writeInput(t, dir, pluginpb.ForkStatePrefix+"p.json", state)}}
	res, err := runTask(context.Background(), sumTask{}, req, &remoteHost{})
	if err != nil {
		t.Fatal(err)
	}
	s, ok, err := pluginpb.DecodeSuspension(res.Data)
	if !ok || err != nil {
		t.Fatalf("not a suspension: %q, %v", res.Data, err)
	}
	if len(s.Children) != 2 || string(s.Children[0]) != `{"x":2}` || string(s.Children[1]) != `{"x":3}` || string(s.Checkpoint) != "saved" || !s.HasCheckpoint {
		t.Fatalf("suspension %+v", s)
	}
	if len(req.Inputs) != 1 || req.Inputs[0].Name != "other" {
		t.Errorf("the task saw inputs %+v", req.Inputs)
	}

	resumed := pluginpb.ForkState{Task: "p", Checkpoint: s.Checkpoint, HasCheckpoint: true,
		Children: []pluginpb.ForkChild{{ID: "p.0", Params: s.Children[0]}, {ID: "p.1", Params: s.Children[1]}}}
	state, _ = json.Marshal(resumed)
	inputs := []File{
		writeInput(t, dir, pluginpb.ForkStatePrefix+"p.json", state),
		writeInput(t, dir, pluginpb.ForkOutPrefix+"p.0/data", []byte("2")),
		writeInput(t, dir, pluginpb.ForkOutPrefix+"p.1/data", []byte("3")),
	}
	req = &Request{TaskID: "p", Params: json.RawMessage(`{"xs":[2,3]}`), WorkDir: dir, Inputs: inputs}
	res, err = runTask(context.Background(), sumTask{}, req, &remoteHost{})
	if err != nil || string(res.Data) != "5" {
		t.Fatalf("resumed: %q, %v", res.Data, err)
	}

	// A parent that spawns other children on its second call fails.
	req = &Request{TaskID: "p", Params: json.RawMessage(`{"xs":[2,4]}`), WorkDir: dir, Inputs: inputs}
	res, err = runTask(context.Background(), sumTask{}, req, &remoteHost{})
	if err == nil || !strings.Contains(err.Error(), `spawn child 1: params {"x":4} differ from {"x":3}`) {
		t.Errorf("changed children: %v, %v", res, err)
	}
}

// Outside a job that spawns, Wait says so.
func TestForkNoSpawn(t *testing.T) {
	req := &Request{TaskID: "p", Params: json.RawMessage(`{"xs":[1]}`), WorkDir: t.TempDir()}
	_, err := runTask(context.Background(), sumTask{}, req, &remoteHost{})
	if !errors.Is(err, ErrNoSpawn) {
		t.Errorf("err %v, want ErrNoSpawn", err)
	}
	if err := Wait(context.Background(), Spawn(context.Background(), map[string]int{})); !errors.Is(err, ErrNoSpawn) {
		t.Errorf("outside Run: %v", err)
	}
}

// verifier rejects every output it is asked to check.
type verifier struct{ sumTask }

func (verifier) Verify(context.Context, *VerifyRequest) error { return errors.New("rejected") }

// A plugin's Verify is not asked about a suspension, which is no answer.
func TestForkVerifySuspension(t *testing.T) {
	dir := t.TempDir()
	data, _ := pluginpb.EncodeSuspension(&pluginpb.Suspension{Children: []json.RawMessage{[]byte(`{}`)}})
	susp := writeInput(t, dir, "s", data)
	plain := writeInput(t, dir, "p", []byte("5"))
	s := &taskServer{impl: verifier{}}
	for _, c := range []struct {
		path string
		ok   bool
	}{{susp.Path, true}, {plain.Path, false}} {
		resp, err := s.Verify(context.Background(), &pluginpb.VerifyRequest{TaskId: "t", Output: []*pluginpb.File{{Name: DataFile, Path: c.path}}})
		if err != nil || resp.Ok != c.ok {
			t.Errorf("%s: %+v, %v; want ok %v", c.path, resp, err, c.ok)
		}
	}
}
