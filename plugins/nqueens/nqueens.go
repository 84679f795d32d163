package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

type queens struct{}

func (queens) Describe() sdk.Info {
	return sdk.Info{Name: "nqueens", Version: "1", Portable: true}
}

// params are a task's: the board, the depth of the tree and the prefix.
type params struct {
	N     int   `json:"n"`
	Split int   `json:"split"`
	Cols  []int `json:"cols,omitempty"`
	// LeafMS makes each leaf take at least this long (for tests that
	// act in the middle of a tree).
	LeafMS int `json:"leaf_ms,omitempty"`
}

// child is what a parent spawns: its prefix (n and split are the job's).
type child struct {
	Cols []int `json:"cols"`
}

func (queens) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if p.N < 1 || p.N > 16 {
		return nil, fmt.Errorf("n: must be between 1 and 16, got %d", p.N)
	}
	for row, c := range p.Cols {
		if c < 0 || c >= p.N || !safe(p.Cols[:row], c) {
			return nil, fmt.Errorf("cols %v: no valid prefix of a %d-board", p.Cols, p.N)
		}
	}
	if len(p.Cols) >= p.Split || len(p.Cols) == p.N {
		if p.LeafMS > 0 {
			select {
			case <-time.After(time.Duration(p.LeafMS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return count(count1(p.N, p.Cols)), nil
	}
	var next []int
	var futures []sdk.Future
	for c := range p.N {
		if safe(p.Cols, c) {
			next = append(next, c)
			futures = append(futures, sdk.Spawn(ctx, child{Cols: append(append([]int{}, p.Cols...), c)}))
		}
	}
	// The columns spawned are the task's checkpoint: a resumed task checks
	// that it gets them back (the tree's tests run it).
	state, _ := json.Marshal(next)
	if err := host.Checkpoint(ctx, state); err != nil {
		return nil, err
	}
	if err := sdk.Wait(ctx, futures...); err != nil {
		return nil, err
	}
	if back, ok, err := host.Resume(ctx); err != nil || !ok || string(back) != string(state) {
		return nil, fmt.Errorf("resumed with checkpoint %q (found %v, %v), want %q", back, ok, err, state)
	}
	total := 0
	for _, f := range futures {
		r, err := f.Result()
		if err != nil {
			return nil, err
		}
		var n int
		if err := r.Decode(&n); err != nil {
			return nil, err
		}
		total += n
	}
	return count(total), nil
}

func count(n int) *sdk.Result { return &sdk.Result{Data: []byte(strconv.Itoa(n))} }

// safe says whether a queen in the next row, column c, is attacked by
// none of the queens in cols (one per row from row 0).
func safe(cols []int, c int) bool {
	row := len(cols)
	for r, q := range cols {
		if q == c || row-r == c-q || row-r == q-c {
			return false
		}
	}
	return true
}

// count1 counts the solutions that extend cols, by backtracking.
func count1(n int, cols []int) int {
	if len(cols) == n {
		return 1
	}
	total := 0
	for c := range n {
		if safe(cols, c) {
			total += count1(n, append(cols, c))
		}
	}
	return total
}
