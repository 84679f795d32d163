package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// BatchTask is one task of a RunBatch call.
type BatchTask struct {
	Req  *sdk.Request
	Host sdk.Host // receives this task's callbacks (nil: none)
	// Timeout bounds the task in the plugin (its ctx); 0: none.
	Timeout time.Duration
}

// BatchResult is one task's result of a RunBatch call.
type BatchResult struct {
	Index int // into the call's tasks
	Res   *sdk.Result
	// Err is the task's own failure (*sdk.TaskError), or nil.
	Err        error
	Start, End time.Time
	// TimedOut: the task's ctx expired (its timeout) before it ended.
	TimedOut bool
	// Clean: the task returned no files and left its work dir empty.
	Clean bool
}

// Hold lets a plugin send several results in one message (SDK protocol
// 4): up to MaxResults, each held at most For. The zero Hold sends each
// result alone.
type Hold struct {
	MaxResults int
	For        time.Duration
}

// RunBatch runs tasks one after another in the plugin (SDK protocol 3,
// pluginpb.BatchProtocol) and calls each, from this goroutine, with
// every task's result as it arrives, in order. It returns nil when the
// plugin ended the stream: after the last task, or early, after a task
// that left files in a work dir a later task names (the caller collects
// them and sends the rest again). Any other error means the plugin
// process or its connection failed; the task after the last one reported
// was running or about to (or, with hold, one of the few after it: their
// results may have been held in the plugin).
func (c *Client) RunBatch(ctx context.Context, tasks []BatchTask, hold Hold, each func(BatchResult)) error {
	req := &pluginpb.RunBatchRequest{Tasks: make([]*pluginpb.RunRequest, len(tasks))}
	if hold.MaxResults > 1 && hold.For > 0 {
		req.MaxResults = uint32(hold.MaxResults)
		req.HoldUs = uint32(max(hold.For.Microseconds(), 1))
	}
	dones := make([]func(), len(tasks))
	defer func() {
		for _, done := range dones {
			if done != nil {
				done()
			}
		}
	}()
	for i, t := range tasks {
		id, done := c.register(t.Host)
		dones[i] = done
		ms := uint64(0)
		if t.Timeout > 0 {
			ms = uint64(max(t.Timeout.Milliseconds(), 1))
		}
		req.Tasks[i] = &pluginpb.RunRequest{
			CallId:    id,
			JobId:     t.Req.JobID,
			TaskId:    t.Req.TaskID,
			Attempt:   uint32(t.Req.Attempt),
			Params:    t.Req.Params,
			Inputs:    filesToPB(t.Req.Inputs),
			WorkDir:   t.Req.WorkDir,
			TimeoutMs: ms,
		}
	}
	stream, err := c.rpc.RunBatch(ctx, req)
	if err != nil {
		return fmt.Errorf("call plugin: %w", err)
	}
	want := 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("call plugin: %w", err)
		}
		more := m.More
		if len(more) > 0 && (req.MaxResults < 2 || len(more) >= int(req.MaxResults)) {
			return fmt.Errorf("call plugin: %d results in one message, %d asked for", len(more)+1, max(req.MaxResults, 1))
		}
		for k := -1; k < len(more); k++ {
			r := m
			if k >= 0 {
				r = more[k]
			}
			if want >= len(tasks) || int(r.Index) != want || r.Response == nil || k >= 0 && len(r.More) > 0 {
				return fmt.Errorf("call plugin: batch result %d out of order (want %d of %d)", r.Index, want, len(tasks))
			}
			dones[want]()
			dones[want] = nil
			res, terr := resultFromPB(tasks[want].Req.TaskID, r.Response, nil)
			each(BatchResult{
				Index: want, Res: res, Err: terr,
				Start: time.Unix(0, r.StartedUnixNano), End: time.Unix(0, r.EndedUnixNano),
				TimedOut: r.TimedOut, Clean: r.Clean,
			})
			want++
		}
	}
}
