package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Task is the plugin: one island per task, the best tour and a
// convergence plot in the reduce step.
type Task struct{}

var (
	_ sdk.Task      = Task{}
	_ sdk.Reducer   = Task{}
	_ sdk.Describer = Task{}
)

// Describe names the plugin. Tours and lengths are integers computed the
// same way on every GOARCH (see euc2D), so replicas of an island that
// runs alone agree byte for byte anywhere.
func (Task) Describe() sdk.Info {
	return sdk.Info{Name: "tspga", Version: "1.0.0", Portable: true}
}

// Output is a task's result, its inline data as JSON.
type Output struct {
	Instance   string  `json:"instance"`
	Cities     int     `json:"cities"`
	Island     int     `json:"island"`
	Islands    int     `json:"islands"`
	Seed       int64   `json:"seed"`
	BestLength int64   `json:"best_length"`
	Tour       []int32 `json:"tour"`
	// Generations is how many generations the island evolved.
	Generations int `json:"generations"`
	Population  int `json:"population"`
	// MigrantsIn counts the immigrants the island accepted.
	MigrantsIn int `json:"migrants_in"`
	// History is the island's best length at generations 0,
	// HistoryEvery, 2*HistoryEvery, ... and at the last generation.
	HistoryEvery int     `json:"history_every"`
	History      []int64 `json:"history"`
}

// Partial is what a task emits as a partial result while it runs.
type Partial struct {
	Island      int   `json:"island"`
	Generation  int   `json:"generation"`
	Generations int   `json:"generations"`
	BestLength  int64 `json:"best_length"`
}

// reportEvery is the least time between two progress reports (and
// partial results).
const reportEvery = 250 * time.Millisecond

// Run evolves the island named by the task's params.
func (Task) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	p, err := decodeParams(req.Decode)
	if err != nil {
		return nil, err
	}
	if p.Random() {
		if err := p.checkSize(p.Cities); err != nil {
			return nil, err
		}
	}
	in, err := loadInstance(req, &p)
	if err != nil {
		return nil, err
	}
	if err := p.checkSize(in.N()); err != nil {
		return nil, err
	}
	out, err := evolve(ctx, in, &p, host)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("tspga: encode output: %w", err)
	}
	return &sdk.Result{Data: data}, nil
}

// loadInstance generates the instance or reads it from the job input the
// params name.
func loadInstance(req *sdk.Request, p *Params) (*Instance, error) {
	if p.Random() {
		return Generate(p.Cities, p.CitySeed)
	}
	f, ok := req.Input(p.Input)
	if !ok {
		return nil, fmt.Errorf("tspga: instance %q: the job has no input named %q", p.Instance, p.Input)
	}
	in, err := ReadTSPLIB(f.Path)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", p.Input, err)
	}
	return in, nil
}

// evolver runs one island against its host. Migration and checkpoints are
// switched off for good when the host does not support them.
type evolver struct {
	host       sdk.Host
	is         *island
	p          *Params
	fp         [32]byte
	checkpoint bool
	migrate    bool
	lastSave   time.Time
	lastReport time.Time
	note       string // said with the next progress report
}

// evolve runs the island from its latest checkpoint, or from a fresh
// population, to the last generation.
func evolve(ctx context.Context, in *Instance, p *Params, host sdk.Host) (*Output, error) {
	e := &evolver{
		host:       host,
		is:         newIsland(in, p),
		p:          p,
		fp:         fingerprint(p, in),
		checkpoint: p.CheckpointEvery > 0 && checkpointSize(in.N(), p.Population, maxHistory+2) <= sdk.MaxCheckpointSize,
		migrate:    p.migrating(),
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	is := e.is
	e.lastSave = time.Now()
	e.report(ctx, true)
	for is.gen < p.Generations {
		if err := is.step(ctx); err != nil {
			return nil, err
		}
		if e.migrate && is.gen%p.MigrateEvery == 0 && is.gen < p.Generations {
			if err := is.migrate(ctx, host); err != nil {
				if err := e.hostError(ctx, err, &e.migrate); err != nil {
					return nil, err
				}
			}
		}
		if e.checkpoint && time.Since(e.lastSave) >= time.Duration(p.CheckpointEvery*float64(time.Second)) {
			if err := host.Checkpoint(ctx, is.marshal(e.fp)); err != nil {
				if err := e.hostError(ctx, err, &e.checkpoint); err != nil {
					return nil, err
				}
			}
			e.lastSave = time.Now()
		}
		e.report(ctx, false)
	}
	e.report(ctx, true)
	best := is.best()
	return &Output{
		Instance:     in.Name,
		Cities:       in.N(),
		Island:       p.Island,
		Islands:      p.Islands,
		Seed:         p.Seed,
		BestLength:   best.length,
		Tour:         best.tour,
		Generations:  is.gen,
		Population:   p.Population,
		MigrantsIn:   is.migrantsIn,
		HistoryEvery: is.every,
		History:      is.history,
	}, nil
}

// start resumes the island from its checkpoint if the host has one of this
// run, or else seeds a fresh population.
func (e *evolver) start(ctx context.Context) error {
	state, found, err := e.host.Resume(ctx)
	switch {
	case errors.Is(err, sdk.ErrUnsupported):
		e.checkpoint = false
	case err != nil:
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("tspga: resume: %w", err)
	case found:
		err := e.is.unmarshal(state, e.fp)
		if err == nil {
			e.note = fmt.Sprintf("resumed at generation %d", e.is.gen)
			return nil
		}
		e.note = "checkpoint ignored: " + err.Error()
	}
	return e.is.seed(ctx)
}

// hostError judges a failed host call: a host that does not support it
// switches the feature off (*enabled = false); an ended ctx ends the
// task; anything else is passed over, and the call is tried again next
// time.
func (e *evolver) hostError(ctx context.Context, err error, enabled *bool) error {
	switch {
	case errors.Is(err, sdk.ErrUnsupported):
		*enabled = false
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return nil
}

// report sends progress and a partial result, at most every reportEvery
// unless forced. Both are advisory: their errors are ignored.
func (e *evolver) report(ctx context.Context, force bool) {
	now := time.Now()
	if !force && now.Sub(e.lastReport) < reportEvery {
		return
	}
	e.lastReport = now
	is := e.is
	frac := 1.0
	if e.p.Generations > 0 {
		frac = float64(is.gen) / float64(e.p.Generations)
	}
	note := fmt.Sprintf("generation %d/%d, best %d", is.gen, e.p.Generations, is.best().length)
	if e.note != "" {
		note += " (" + e.note + ")"
		e.note = ""
	}
	_ = e.host.Progress(ctx, frac, note)
	b, _ := json.Marshal(Partial{Island: e.p.Island, Generation: is.gen, Generations: e.p.Generations, BestLength: is.best().length})
	_ = e.host.Partial(ctx, b)
}
