package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

// berlin52 is the TSPLIB instance as a job input.
func berlin52(t testing.TB) sdk.File {
	t.Helper()
	path, err := filepath.Abs("testdata/berlin52.tsp")
	if err != nil {
		t.Fatal(err)
	}
	return sdk.File{Name: "berlin52.tsp", Path: path}
}

// berlin52Opt is the published optimal tour of berlin52 (1-based), whose
// length is 7542.
var berlin52Opt = []int32{1, 49, 32, 45, 19, 41, 8, 9, 10, 43, 33, 51, 11, 52, 14, 13, 47, 26, 27, 28, 12, 25, 4, 6, 15, 5, 24, 48, 38, 37, 40, 39, 36, 35, 34, 44, 46, 16, 29, 50, 20, 23, 30, 2, 7, 42, 21, 17, 3, 18, 31, 22}

func TestBerlin52Data(t *testing.T) {
	in, err := ReadTSPLIB("testdata/berlin52.tsp")
	if err != nil {
		t.Fatal(err)
	}
	tour := make([]int32, len(berlin52Opt))
	for i, c := range berlin52Opt {
		tour[i] = c - 1
	}
	if !isTour(tour, in.N()) {
		t.Fatal("the published tour is not a tour of the file's cities")
	}
	if l := in.Length(tour); l != 7542 {
		t.Errorf("published optimal tour has length %d here, want 7542", l)
	}
	ex, err := os.ReadFile("../../examples/data/berlin52.tsp")
	if err != nil {
		t.Fatal(err)
	}
	td, _ := os.ReadFile("testdata/berlin52.tsp")
	if !bytes.Equal(ex, td) {
		t.Error("examples/data/berlin52.tsp and testdata/berlin52.tsp differ")
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	m = maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// runIslands runs one task per island of params in a fresh sdktest.Job,
// concurrently, and returns their outputs (cleaned up with the test).
func runIslands(t testing.TB, params map[string]any, inputs ...sdk.File) (*sdktest.Job, []*sdktest.Outcome, []*Output) {
	t.Helper()
	islands := 1
	if n, ok := params["islands"]; ok {
		islands = n.(int)
	}
	var reqs []*sdk.Request
	for i := range islands {
		raw, err := sdktest.Params(with(params, "island", i))
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, &sdk.Request{TaskID: fmt.Sprintf("%04d", i), Params: raw, Inputs: inputs})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := sdktest.NewJob()
	outs, err := job.RunTasks(ctx, Task{}, reqs)
	for _, o := range outs {
		if o != nil {
			t.Cleanup(func() { o.Cleanup() })
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	res := make([]*Output, len(outs))
	for i, o := range outs {
		res[i] = decodeOutput(t, o.Files[sdk.DataFile])
	}
	return job, outs, res
}

func decodeOutput(t testing.TB, data []byte) *Output {
	t.Helper()
	var o Output
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("output %q: %v", data, err)
	}
	return &o
}

// checkOutput checks an island's output against its instance.
func checkOutput(t testing.TB, in *Instance, o *Output) {
	t.Helper()
	if !isTour(o.Tour, in.N()) {
		t.Fatalf("island %d: tour %v is not a tour of %d cities", o.Island, o.Tour, in.N())
	}
	if l := in.Length(o.Tour); l != o.BestLength {
		t.Errorf("island %d: best_length %d, its tour is %d long", o.Island, o.BestLength, l)
	}
	if last := o.History[len(o.History)-1]; last != o.BestLength {
		t.Errorf("island %d: history ends at %d, best is %d", o.Island, last, o.BestLength)
	}
	for i := 1; i < len(o.History); i++ {
		if o.History[i] > o.History[i-1] {
			t.Errorf("island %d: best length went up, %d to %d, at history entry %d", o.Island, o.History[i-1], o.History[i], i)
			break
		}
	}
}

func TestSmallInstancesOptimal(t *testing.T) {
	for _, n := range []int{10, 12, 14} {
		for seed := int64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("n%d-seed%d", n, seed), func(t *testing.T) {
				in, err := Generate(n, seed)
				if err != nil {
					t.Fatal(err)
				}
				opt := heldKarp(in)
				params := map[string]any{"cities": n, "city_seed": seed, "islands": 3, "population": 16, "generations": 20, "migrate_every": 5}
				_, _, outs := runIslands(t, params)
				best := outs[0].BestLength
				for _, o := range outs {
					checkOutput(t, in, o)
					best = min(best, o.BestLength)
				}
				if best != opt {
					t.Errorf("best of 3 islands %d, Held-Karp optimum %d", best, opt)
				}
				t.Logf("%d cities: GA %d, Held-Karp %d", n, best, opt)
			})
		}
	}
}

func TestBerlin52(t *testing.T) {
	in, err := ReadTSPLIB("testdata/berlin52.tsp")
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"instance": "berlin52", "islands": 3, "population": 32, "generations": 60, "migrate_every": 10, "migrants": 2}
	start := time.Now()
	_, _, outs := runIslands(t, params, berlin52(t))
	took := time.Since(start)
	best := outs[0].BestLength
	for _, o := range outs {
		checkOutput(t, in, o)
		best = min(best, o.BestLength)
	}
	if best > 7542*102/100 {
		t.Errorf("best %d, more than 2%% over the optimum 7542", best)
	}
	if took > 20*time.Second {
		t.Errorf("3 islands took %v", took)
	}
	t.Logf("berlin52, 3 islands x 60 generations of 32: best %d (optimum 7542) in %v", best, took)
}

// TestDeterministicAlone: an island without migration gives the same
// bytes every time, with or without a host that supports migration and
// checkpoints, and islands of one seed differ.
func TestDeterministicAlone(t *testing.T) {
	params := map[string]any{"cities": 80, "generations": 40, "population": 24, "seed": 5}
	_, a, _ := runIslands(t, params)
	_, b, _ := runIslands(t, params)
	if !bytes.Equal(a[0].Files[sdk.DataFile], b[0].Files[sdk.DataFile]) {
		t.Error("two runs in a job differ")
	}
	out, err := sdktest.Run(context.Background(), Task{}, params)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	if !bytes.Equal(a[0].Files[sdk.DataFile], out.Files[sdk.DataFile]) {
		t.Error("a run on a host without globals and checkpoints differs from one in a job")
	}
	// Islands of a job with an old host: no migration, still deterministic.
	p3 := with(params, "islands", 3, "island", 2)
	x, err := sdktest.Run(context.Background(), Task{}, p3)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Cleanup()
	y, err := sdktest.Run(context.Background(), Task{}, p3)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Cleanup()
	if !bytes.Equal(x.Files[sdk.DataFile], y.Files[sdk.DataFile]) {
		t.Error("island 2 of 3 without migration differs between runs")
	}
	if bytes.Equal(x.Files[sdk.DataFile], out.Files[sdk.DataFile]) {
		t.Error("islands 0 and 2 produced the same output")
	}
}

// TestGolden pins one island's output: a change means results are no
// longer reproducible across versions of the plugin (or Go, or GOARCH).
func TestGolden(t *testing.T) {
	out, err := sdktest.Run(context.Background(), Task{}, map[string]any{"cities": 150, "city_seed": 3, "generations": 25, "population": 12, "seed": 9})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	data := out.Files[sdk.DataFile]
	sum := sha256.Sum256(data)
	const want = "15b670e6f00eb24cc4686b465a1c6d68e1eacf207174cbd3557949c065e2b2e1"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("output digest %s, want %s; output:\n%s", got, want, data)
	}
}

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, Task{},
		sdktest.Case{Name: "random", Params: map[string]any{"cities": 40, "generations": 30, "population": 16}},
		sdktest.Case{Name: "berlin52", Params: map[string]any{"instance": "berlin52", "generations": 20, "population": 16, "islands": 3, "island": 1}, Inputs: []sdk.File{berlin52(t)}},
	)
}

// hookHost calls after once Checkpoint has saved a state.
type hookHost struct {
	sdk.Host
	once  sync.Once
	after func()
}

func (h *hookHost) Checkpoint(ctx context.Context, state []byte) error {
	err := h.Host.Checkpoint(ctx, state)
	if err == nil {
		h.once.Do(h.after)
	}
	return err
}

// TestCheckpointResume cancels an island right after its first
// checkpoint and starts it again in the same job: it resumes at the
// checkpoint's generation and ends with exactly the output of a run that
// was never interrupted.
func TestCheckpointResume(t *testing.T) {
	params := map[string]any{"cities": 150, "generations": 150, "population": 24, "checkpoint_every": 0.001, "seed": 3}
	raw, err := sdktest.Params(params)
	if err != nil {
		t.Fatal(err)
	}
	_, whole, _ := runIslands(t, params)

	job := sdktest.NewJob()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := &hookHost{Host: job.Host("0000"), after: cancel}
	_, err = Task{}.Run(ctx, &sdk.Request{TaskID: "0000", Params: raw, WorkDir: t.TempDir()}, host)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	state, ok := job.Checkpoint("0000")
	if !ok {
		t.Fatal("no checkpoint")
	}
	gen := int(uint32(state[40])<<24 | uint32(state[41])<<16 | uint32(state[42])<<8 | uint32(state[43]))
	if gen < 1 || gen >= 150 {
		t.Fatalf("checkpoint at generation %d", gen)
	}

	outs, err := job.RunTasks(context.Background(), Task{}, []*sdk.Request{{TaskID: "0000", Params: raw}})
	if err != nil {
		t.Fatal(err)
	}
	defer outs[0].Cleanup()
	res := outs[0]
	if want := fmt.Sprintf("resumed at generation %d", gen); len(res.Notes) == 0 || !strings.Contains(res.Notes[0], want) {
		t.Errorf("first note %q, want it to say %q", res.Notes, want)
	}
	if res.Progress[0] != float64(gen)/150 {
		t.Errorf("first progress %v, want %v", res.Progress[0], float64(gen)/150)
	}
	if !bytes.Equal(res.Files[sdk.DataFile], whole[0].Files[sdk.DataFile]) {
		t.Errorf("resumed output differs from an uninterrupted run:\n%s\n%s", res.Files[sdk.DataFile], whole[0].Files[sdk.DataFile])
	}
	t.Logf("resumed at generation %d of 150", gen)

	// A checkpoint of other params is not resumed.
	other := job.Host("0000")
	otherParams, _ := sdktest.Params(with(params, "seed", 4))
	o, err := Task{}.Run(context.Background(), &sdk.Request{TaskID: "0000", Params: otherParams, WorkDir: t.TempDir()}, other)
	if err != nil {
		t.Fatal(err)
	}
	if decodeOutput(t, o.Data).Generations != 150 {
		t.Error("run with other params did not finish")
	}
}

func TestMigration(t *testing.T) {
	params := map[string]any{"cities": 200, "city_seed": 4, "islands": 3, "population": 16, "generations": 100, "migrate_every": 3, "migrants": 3, "mutation_rate": 0.05}
	job, _, outs := runIslands(t, params)
	in, err := Generate(200, 4)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, o := range outs {
		checkOutput(t, in, o)
		total += o.MigrantsIn
		g := job.Global(GlobalKey(i))
		if g.Version == 0 {
			t.Errorf("island %d never published", i)
			continue
		}
		island, tours, err := decodeMigrants(g.Value, in.N())
		if err != nil || island != i || len(tours) != 3 {
			t.Errorf("island %d published island %d, %d tours, %v", i, island, len(tours), err)
		}
	}
	if total == 0 {
		t.Error("no island accepted an immigrant")
	}
	if keys := strings.Join(job.Keys(), " "); keys != "tspga/best/0 tspga/best/1 tspga/best/2" {
		t.Errorf("globals %s", keys)
	}
	t.Logf("immigrants accepted: %d, %d, %d", outs[0].MigrantsIn, outs[1].MigrantsIn, outs[2].MigrantsIn)
}

// TestMigrateUnit: an island takes in its ring neighbour's best tours.
func TestMigrateUnit(t *testing.T) {
	in, err := Generate(60, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	job := sdktest.NewJob()
	islands := make([]*island, 2)
	for i := range islands {
		p := DefaultParams()
		p.Islands, p.Island, p.Population, p.Migrants = 2, i, 10, 2
		islands[i] = newIsland(in, &p)
		if err := islands[i].seed(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Make island 0's best better than anything island 1 has.
	for range 30 {
		islands[0].step(ctx)
	}
	a, b := islands[0], islands[1]
	ha, hb := job.Host("a"), job.Host("b")
	if err := a.migrate(ctx, ha); err != nil { // nothing from 1 yet
		t.Fatal(err)
	}
	if a.migrantsIn != 0 {
		t.Errorf("island 0 took %d immigrants from an island that never published", a.migrantsIn)
	}
	if err := b.migrate(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if b.migrantsIn == 0 || !same(b.best(), a.best()) {
		t.Errorf("island 1 took %d immigrants; its best %d, island 0's %d", b.migrantsIn, b.best().length, a.best().length)
	}
	before := b.migrantsIn
	if err := b.migrate(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if b.migrantsIn != before {
		t.Errorf("the same immigrants were taken twice")
	}
}

func TestReduce(t *testing.T) {
	params := map[string]any{"instance": "berlin52", "islands": 3, "population": 16, "generations": 15, "optimum": 7542}
	_, outs, res := runIslands(t, params, berlin52(t))
	var tasks []sdk.TaskOutput
	for i, o := range outs {
		tasks = append(tasks, o.Output(fmt.Sprintf("%04d", i)))
	}
	red, err := sdktest.Reduce(context.Background(), Task{}, params, tasks)
	if err != nil {
		t.Fatal(err)
	}
	defer red.Cleanup()
	var best Best
	if err := json.Unmarshal(red.Files[BestFile], &best); err != nil {
		t.Fatal(err)
	}
	want := res[0]
	for _, o := range res {
		if o.BestLength < want.BestLength {
			want = o
		}
	}
	if best.Length != want.BestLength || best.Island != want.Island || best.Task != fmt.Sprintf("%04d", want.Island) || len(best.Islands) != 3 {
		t.Errorf("best.json = %+v, want island %d's %d", best, want.Island, want.BestLength)
	}
	if best.GapPercent == nil || *best.GapPercent != float64(best.Length-7542)/75.42 && *best.GapPercent > 0.001 {
		t.Errorf("gap %v for length %d", best.GapPercent, best.Length)
	}
	svg := red.Files[ConvergenceFile]
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("convergence.svg is not XML: %v", err)
	}
	if n := strings.Count(string(svg), "<polyline"); n != 3 {
		t.Errorf("convergence.svg has %d lines, want 3", n)
	}
	if !strings.Contains(string(svg), "optimum 7542") {
		t.Error("convergence.svg has no optimum line")
	}
	again, err := sdktest.Reduce(context.Background(), Task{}, params, tasks)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Cleanup()
	for _, f := range []string{BestFile, ConvergenceFile} {
		if !bytes.Equal(again.Files[f], red.Files[f]) {
			t.Errorf("%s differs between two reduces", f)
		}
	}
	if os.Getenv("TSPGA_KEEP_SVG") != "" {
		os.WriteFile(os.Getenv("TSPGA_KEEP_SVG"), svg, 0o644)
	}

	// Outputs that are not tspga's are refused.
	bad := filepath.Join(t.TempDir(), "data")
	os.WriteFile(bad, []byte(`{"x":1}`), 0o644)
	if _, err := sdktest.Reduce(context.Background(), Task{}, params, []sdk.TaskOutput{{TaskID: "x", Files: []sdk.File{{Name: sdk.DataFile, Path: bad}}}}); err == nil {
		t.Error("reduce of a foreign output: no error")
	}
}

func TestParamErrors(t *testing.T) {
	tests := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"cities": 2}, "cities 2"},
		{map[string]any{"population": 1}, "population 1"},
		{map[string]any{"islands": 3, "island": 3}, "island 3"},
		{map[string]any{"migrants": 64}, "migrants 64"},
		{map[string]any{"topology": "star"}, "topology"},
		{map[string]any{"mutation_rate": 1.5}, "mutation_rate"},
		{map[string]any{"checkpoint_every": -1}, "checkpoint_every"},
		{map[string]any{"instance": "berlin52"}, `no input named "berlin52.tsp"`},
		{map[string]any{"instance": "random", "input": "x.tsp"}, "takes no input"},
		{map[string]any{"cities": 3000, "population": 20000}, "over 50000000"},
	}
	for _, tt := range tests {
		_, err := sdktest.Run(context.Background(), Task{}, tt.params)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("params %v: err = %v, want it to mention %q", tt.params, err, tt.want)
		}
	}
}

func TestCheckpointCodec(t *testing.T) {
	in, err := Generate(30, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultParams()
	p.Population, p.Generations = 12, 10
	is := newIsland(in, &p)
	ctx := context.Background()
	if err := is.seed(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		is.step(ctx)
	}
	fp := fingerprint(&p, in)
	b := is.marshal(fp)
	back := newIsland(in, &p)
	if err := back.unmarshal(b, fp); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.marshal(fp), b) || back.rng.state != is.rng.state || back.gen != 4 {
		t.Error("checkpoint does not round-trip")
	}
	q := p
	q.CheckpointEvery = 30
	if fingerprint(&q, in) != fp {
		t.Error("checkpoint_every changes the fingerprint")
	}
	q.Seed++
	if err := back.unmarshal(b, fingerprint(&q, in)); err == nil {
		t.Error("checkpoint of other params accepted")
	}
	for _, cut := range []int{0, 10, checkpointHeader, len(b) - 1} {
		if err := back.unmarshal(b[:cut], fp); err == nil {
			t.Errorf("checkpoint cut to %d bytes accepted", cut)
		}
	}
	bad := bytes.Clone(b)
	bad[checkpointHeader+1] = bad[checkpointHeader+3] // repeat a city
	if err := back.unmarshal(bad, fp); err == nil {
		t.Error("checkpoint with a broken tour accepted")
	}
}

func FuzzCheckpoint(f *testing.F) {
	in, _ := Generate(8, 1)
	p := DefaultParams()
	p.Population, p.Generations = 4, 3
	is := newIsland(in, &p)
	is.seed(context.Background())
	fp := fingerprint(&p, in)
	f.Add(is.marshal(fp))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := newIsland(in, &p)
		if x.unmarshal(b, fp) == nil {
			for _, ind := range x.pop {
				if !isTour(ind.tour, 8) {
					t.Fatalf("accepted a checkpoint with tour %v", ind.tour)
				}
			}
		}
	})
}

func FuzzMigrants(f *testing.F) {
	f.Add(encodeMigrants(1, 2, [][]int32{{0, 1, 2, 3}, {3, 2, 1, 0}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, tours, err := decodeMigrants(b, 4)
		if err != nil {
			return
		}
		for _, tour := range tours {
			if !isTour(tour, 4) {
				t.Fatalf("decoded %v", tour)
			}
		}
	})
}

func TestMaxMigrants(t *testing.T) {
	for _, n := range []int{3, 52, MaxCities} {
		k := maxMigrants(n)
		tours := make([][]int32, k)
		for i := range tours {
			tours[i] = make([]int32, n)
			for j := range n {
				tours[i][j] = int32(j)
			}
		}
		if b := encodeMigrants(0, 0, tours); len(b) > sdk.MaxGlobalSize {
			t.Errorf("%d tours of %d cities take %d bytes", k, n, len(b))
		}
	}
	if strconv.Itoa(maxMigrants(MaxCities)) == "0" {
		t.Error("no tour of MaxCities fits a global")
	}
}
