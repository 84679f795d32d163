package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// CrashStatus is the exit status of a crash asked for by the params.
const CrashStatus = 3

// MaxOutputBytes bounds output_bytes: the output travels inline in one
// gRPC message.
const MaxOutputBytes = 256 << 20

// echo is the task. Its fields are the side effects that tests replace.
type echo struct {
	exit func(code int) // os.Exit
	log  *slog.Logger   // nil: no logging
}

var (
	_ sdk.Task      = (*echo)(nil)
	_ sdk.Describer = (*echo)(nil)
)

// params are echo's switches; see docs/plugins/echo.md.
type params struct {
	SleepMS       int  `json:"sleep_ms"`
	Partials      int  `json:"partials"`
	Fail          bool `json:"fail"`
	Panic         bool `json:"panic"`
	Crash         bool `json:"crash"`
	CrashAttempts int  `json:"crash_attempts"`
	OutputBytes   int  `json:"output_bytes"`
}

// errFail is the task error asked for by "fail".
var errFail = errors.New("echo: failing as asked")

// Describe names the plugin.
func (*echo) Describe() sdk.Info {
	return sdk.Info{Name: "echo", Version: "1.0.0", Portable: true}
}

// Run answers one task; see docs/plugins/echo.md.
func (e *echo) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	if err := sleepWithPartials(ctx, host, time.Duration(p.SleepMS)*time.Millisecond, p.Partials); err != nil {
		return nil, err
	}
	if p.Panic {
		panic("echo: panicking as asked")
	}
	if p.crashes(req.Attempt) {
		if e.log != nil {
			e.log.Warn("echo: crashing as asked", "task", req.TaskID, "attempt", req.Attempt, "status", CrashStatus)
		}
		e.exit(CrashStatus)
		return nil, errors.New("echo: crash asked for, but exit returned")
	}
	if p.Fail {
		return nil, errFail
	}
	if p.OutputBytes > 0 {
		return &sdk.Result{Data: pseudoRandom(p.OutputBytes, req.Params)}, nil
	}
	return &sdk.Result{Data: req.Params}, nil
}

func (p *params) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"sleep_ms", p.SleepMS}, {"partials", p.Partials}, {"crash_attempts", p.CrashAttempts}, {"output_bytes", p.OutputBytes}} {
		if f.v < 0 {
			return fmt.Errorf("echo: %s is %d, must not be negative", f.name, f.v)
		}
	}
	if p.OutputBytes > MaxOutputBytes {
		return fmt.Errorf("echo: output_bytes is %d, at most %d allowed", p.OutputBytes, MaxOutputBytes)
	}
	return nil
}

// crashes says whether attempt (0 on the first try) must crash.
func (p *params) crashes(attempt int) bool {
	if p.CrashAttempts > 0 {
		return attempt < p.CrashAttempts
	}
	return p.Crash
}

// sleepWithPartials sleeps for d in n+1 equal steps and emits a partial
// result after each of the first n. It returns early with ctx's error.
func sleepWithPartials(ctx context.Context, host sdk.Host, d time.Duration, n int) error {
	step := d / time.Duration(n+1)
	for i := 1; i <= n; i++ {
		if err := sleep(ctx, step); err != nil {
			return err
		}
		if err := host.Partial(ctx, fmt.Appendf(nil, `{"partial":%d,"of":%d}`, i, n)); err != nil {
			return fmt.Errorf("echo: partial %d: %w", i, err)
		}
	}
	return sleep(ctx, d-step*time.Duration(n))
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// pseudoRandom returns n bytes of a SplitMix64 stream seeded with the
// FNV-1a hash of seed: deterministic, incompressible, and different for
// different seeds (so content-addressed stores do not deduplicate them).
func pseudoRandom(n int, seed []byte) []byte {
	h := fnv.New64a()
	h.Write(seed)
	x := h.Sum64()
	out := make([]byte, (n+7)/8*8)
	for i := 0; i < len(out); i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(out[i:], z^(z>>31))
	}
	return out[:n]
}
