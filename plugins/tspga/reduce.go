package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Files the reduce step writes.
const (
	BestFile        = "best.json"
	ConvergenceFile = "convergence.svg"
)

// Best is the content of BestFile.
type Best struct {
	Instance string  `json:"instance"`
	Cities   int     `json:"cities"`
	Length   int64   `json:"length"`
	Tour     []int32 `json:"tour"`
	Island   int     `json:"island"`
	Task     string  `json:"task"`
	// Optimum and GapPercent are there when the job params give the
	// instance's known optimum.
	Optimum    int64    `json:"optimum,omitempty"`
	GapPercent *float64 `json:"gap_percent,omitempty"`
	Islands    []Entry  `json:"islands"`
}

// Entry summarizes one island in BestFile.
type Entry struct {
	Task       string `json:"task"`
	Island     int    `json:"island"`
	BestLength int64  `json:"best_length"`
	MigrantsIn int    `json:"migrants_in"`
}

// Reduce picks the shortest tour of all islands (the lowest island, then
// the first task, on a tie), writes it to BestFile and plots every
// island's best length per generation in ConvergenceFile.
func (Task) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	var jp struct {
		Optimum int64 `json:"optimum"`
	}
	if err := req.Decode(&jp); err != nil {
		return nil, err
	}
	if len(req.Tasks) == 0 {
		return nil, fmt.Errorf("tspga: no task outputs to reduce")
	}
	outs := make([]*Output, len(req.Tasks))
	var best Best
	bi := -1
	for i, t := range req.Tasks {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		o, err := readOutput(t)
		if err != nil {
			return nil, err
		}
		if i > 0 && (o.Instance != outs[0].Instance || o.Cities != outs[0].Cities) {
			return nil, fmt.Errorf("tspga: task %s solved %s (%d cities), task %s %s (%d cities)", t.TaskID, o.Instance, o.Cities, req.Tasks[0].TaskID, outs[0].Instance, outs[0].Cities)
		}
		outs[i] = o
		best.Islands = append(best.Islands, Entry{Task: t.TaskID, Island: o.Island, BestLength: o.BestLength, MigrantsIn: o.MigrantsIn})
		if bi < 0 || o.BestLength < outs[bi].BestLength || o.BestLength == outs[bi].BestLength && o.Island < outs[bi].Island {
			bi = i
		}
	}
	b := outs[bi]
	best.Instance, best.Cities, best.Length, best.Tour = b.Instance, b.Cities, b.BestLength, b.Tour
	best.Island, best.Task = b.Island, req.Tasks[bi].TaskID
	if jp.Optimum > 0 {
		best.Optimum = jp.Optimum
		gap := roundTo(100*float64(b.BestLength-jp.Optimum)/float64(jp.Optimum), 3)
		best.GapPercent = &gap
	}
	js, err := json.MarshalIndent(best, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("tspga: encode %s: %w", BestFile, err)
	}
	if err := os.WriteFile(filepath.Join(req.WorkDir, BestFile), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("tspga: %w", err)
	}
	if err := os.WriteFile(filepath.Join(req.WorkDir, ConvergenceFile), convergenceSVG(req.Tasks, outs, jp.Optimum), 0o644); err != nil {
		return nil, fmt.Errorf("tspga: %w", err)
	}
	return &sdk.Result{Files: []string{BestFile, ConvergenceFile}}, nil
}

// readOutput reads and checks one task's output.
func readOutput(t sdk.TaskOutput) (*Output, error) {
	b, err := t.Data()
	if err != nil {
		return nil, fmt.Errorf("tspga: %w", err)
	}
	var o Output
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("tspga: task %s: output is not tspga's: %w", t.TaskID, err)
	}
	if len(o.Tour) != o.Cities || o.Cities < 3 || o.HistoryEvery < 1 || len(o.History) == 0 {
		return nil, fmt.Errorf("tspga: task %s: output is not tspga's (tour of %d cities, %d history entries)", t.TaskID, len(o.Tour), len(o.History))
	}
	return &o, nil
}

func roundTo(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}

// convergenceSVG plots each island's best length against the generation.
func convergenceSVG(tasks []sdk.TaskOutput, outs []*Output, optimum int64) []byte {
	c := Chart{
		Title:  fmt.Sprintf("tspga: %s, %d islands", outs[0].Instance, len(outs)),
		XLabel: "generation",
		YLabel: "best tour length",
	}
	for i, o := range outs {
		s := Series{Name: fmt.Sprintf("island %d (task %s): %d", o.Island, tasks[i].TaskID, o.BestLength)}
		for k, l := range o.History {
			s.X = append(s.X, float64(min(k*o.HistoryEvery, o.Generations)))
			s.Y = append(s.Y, float64(l))
		}
		c.Series = append(c.Series, s)
	}
	if optimum > 0 {
		c.Lines = append(c.Lines, HLine{Name: fmt.Sprintf("optimum %d", optimum), Y: float64(optimum)})
	}
	return c.SVG()
}
