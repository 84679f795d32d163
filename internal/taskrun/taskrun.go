package taskrun

import (
	"context"
	"os"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Attempt is one run of one task.
type Attempt struct {
	JobID   string
	TaskID  string
	Attempt int
	Params  []byte // the task's parameters, JSON
	Inputs  []sdk.File
	// Timeout bounds the plugin call; the pool kills a plugin that
	// overruns it (outcome timeout).
	Timeout time.Duration
	// Host answers the task's callbacks (progress, partial results,
	// messages, globals, checkpoints).
	Host sdk.Host
	// InlineMax > 0: an output that is inline data alone, of at most
	// InlineMax bytes, is digested in memory and not staged.
	InlineMax int
	// Tamper, if set, may change the staged output before it is digested
	// (fault injection for the tests of answer verification: node.Lie).
	// An attempt with Tamper is always staged.
	Tamper func(stage string) error
	// Stage is where the output is staged (default WORK.out; RunBatch
	// callers that keep several outputs at once name one per attempt).
	Stage string
	// Disk > 0 bounds the work folder: a task that leaves more in it, or
	// whose write past its file-size limit failed, is reported
	// "exceeded disk limit" (disk.go).
	Disk int64
}

// Output is what an attempt produced.
type Output struct {
	// Outcome is a report outcome: ok, canceled, timeout, task_error or
	// crashed.
	Outcome string
	Err     error // nil when Outcome is ok
	// Digest is the output's digest, as outputs.Digest.
	Digest digest.ID
	// Stage is the folder holding the output files (WORK.out), named by
	// Files (sorted, slash-separated). The caller owns it and removes it.
	// Empty when the attempt failed (Run removed what it staged) or the
	// output is inline.
	Stage string
	Files []string
	// Inline: the output is Data alone (sdk.DataFile, or nothing when Data
	// is nil), not staged.
	Inline bool
	Data   []byte
	// Start and End: when the task ran in the plugin (set by RunBatch).
	Start, End time.Time
}

// Run runs the attempt in pool, in the empty work folder work, and
// collects its output. ctx ending (the lease revoked, the job over) stops
// the task: the outcome is then canceled.
func Run(ctx context.Context, pool *pluginhost.Pool, work string, a Attempt) Output {
	req := &sdk.Request{
		JobID:   a.JobID,
		TaskID:  a.TaskID,
		Attempt: a.Attempt,
		Params:  a.Params,
		Inputs:  a.Inputs,
		WorkDir: work,
	}
	res, err := pool.Run(ctx, req, a.Host, a.Timeout)
	err = checkDisk(work, a.Disk, err)
	var out Output
	if err == nil {
		out, err = Collect(work, res, a.InlineMax, a.Tamper)
	}
	out.Outcome = pluginhost.Classify(ctx, err)
	out.Err = err
	return out
}

// Collect stages a result's files from work into work+".out" and digests
// them (Run's second half; the reduce step uses it alone). inlineMax and
// tamper are as in Attempt. On error, nothing staged is left behind.
func Collect(work string, res *sdk.Result, inlineMax int, tamper func(string) error) (Output, error) {
	return collectTo(work, work+".out", res, inlineMax, tamper)
}

func collectTo(work, stage string, res *sdk.Result, inlineMax int, tamper func(string) error) (Output, error) {
	if inlineMax > 0 && tamper == nil && len(res.Files) == 0 && len(res.Data) <= inlineMax {
		return Output{Inline: true, Data: res.Data, Digest: outputs.DigestInline(res.Data)}, nil
	}
	out, err := stageAndDigest(work, stage, res, tamper)
	if err != nil {
		os.RemoveAll(stage)
		return Output{}, err
	}
	return out, nil
}

func stageAndDigest(work, stage string, res *sdk.Result, tamper func(string) error) (Output, error) {
	if err := outputs.Gather(work, stage, res); err != nil {
		return Output{}, err
	}
	if tamper != nil {
		if err := tamper(stage); err != nil {
			return Output{}, err
		}
	}
	sum, files, err := outputs.Digest(stage)
	if err != nil {
		return Output{}, err
	}
	return Output{Stage: stage, Digest: sum, Files: files}, nil
}
