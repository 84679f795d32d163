package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

type params struct {
	Increments int `json:"increments"`
	// CheckpointEvery > 0 checkpoints the increments done so far every
	// that many increments (and resumes from there), IncrementMS waits
	// between increments.
	CheckpointEvery int  `json:"checkpoint_every"`
	IncrementMS     int  `json:"increment_ms"`
	Ring            int  `json:"ring"`
	Index           int  `json:"index"`
	Steps           int  `json:"steps"`
	StepMS          int  `json:"step_ms"`
	Partials        bool `json:"partials"`
}

type output struct {
	Increments []uint64 `json:"increments,omitempty"`
	Received   string   `json:"received,omitempty"`
	ResumedAt  int      `json:"resumed_at"`
	Steps      int      `json:"steps"`
}

type probe struct{}

func (probe) Describe() sdk.Info { return sdk.Info{Name: "vcprobe", Version: "1", Portable: true} }

func (probe) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	var out output
	if p.CheckpointEvery > 0 {
		if state, ok, err := host.Resume(ctx); err == nil && ok {
			if err := json.Unmarshal(state, &out.Increments); err != nil {
				return nil, fmt.Errorf("resume: %w", err)
			}
			out.ResumedAt = len(out.Increments)
		}
	}
	for i := len(out.Increments); i < p.Increments; i++ {
		if p.IncrementMS > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(p.IncrementMS) * time.Millisecond):
			}
		}
		g, err := sdk.Update(ctx, host, "counter", func(cur []byte) ([]byte, error) {
			var n uint64
			if len(cur) == 8 {
				n = binary.BigEndian.Uint64(cur)
			}
			return binary.BigEndian.AppendUint64(nil, n+1), nil
		})
		if err != nil {
			return nil, fmt.Errorf("increment: %w", err)
		}
		out.Increments = append(out.Increments, binary.BigEndian.Uint64(g.Value))
		if p.CheckpointEvery > 0 && (i+1)%p.CheckpointEvery == 0 {
			state, _ := json.Marshal(out.Increments)
			if err := host.Checkpoint(ctx, state); err != nil {
				return nil, fmt.Errorf("checkpoint: %w", err)
			}
			if p.Partials {
				host.Partial(ctx, []byte(fmt.Sprintf(`{"increments":%d}`, i+1)))
			}
		}
	}
	if p.Ring > 1 {
		to := fmt.Sprintf("%04d", (p.Index+1)%p.Ring)
		if err := host.Send(ctx, to, []byte("from "+req.TaskID)); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
		m, err := host.Recv(ctx)
		if err != nil {
			return nil, fmt.Errorf("recv: %w", err)
		}
		out.Received = string(m.Data)
	}
	if p.Steps > 0 {
		if err := steps(ctx, host, p, &out); err != nil {
			return nil, err
		}
	}
	data, err := json.Marshal(out)
	return &sdk.Result{Data: data}, err
}

func steps(ctx context.Context, host sdk.Host, p params, out *output) error {
	step := 0
	if state, ok, err := host.Resume(ctx); err == nil && ok {
		if step, err = strconv.Atoi(string(state)); err != nil {
			return fmt.Errorf("resume: bad checkpoint %q", state)
		}
		out.ResumedAt = step
	}
	d := time.Duration(max(p.StepMS, 1)) * time.Millisecond
	if p.StepMS == 0 {
		d = 100 * time.Millisecond
	}
	for ; step < p.Steps; step++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		if err := host.Checkpoint(ctx, []byte(strconv.Itoa(step+1))); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if p.Partials {
			host.Partial(ctx, []byte(fmt.Sprintf(`{"step":%d}`, step+1)))
		}
		host.Progress(ctx, float64(step+1)/float64(p.Steps), "")
	}
	out.Steps = p.Steps
	return nil
}

func main() { sdk.Serve(probe{}) }
