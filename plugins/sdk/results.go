package sdk

import (
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// maxHold bounds how long a result may be held whatever the host asks:
// a host's watchdog counts a task's time from the result before it.
const maxHold = 50 * time.Millisecond

// maxHeldBytes bounds a message of several results, well below gRPC's
// default 4 MiB (a result bigger than it goes alone, as without holding).
const maxHeldBytes = 1 << 20

// resultSender sends a batch's results in order. With max > 1 it holds
// finished results and sends up to max in one message (the first result
// carries the others in `more`): when max are held, when the oldest has
// waited hold (a timer, so a long task after a short one does not keep
// its result back), and at the end of the call. Sends are serialized
// by mu (a gRPC stream takes one sender at a time).
type resultSender struct {
	stream grpc.ServerStreamingServer[pluginpb.RunBatchResult]
	max    int
	hold   time.Duration

	mu    sync.Mutex
	held  []*pluginpb.RunBatchResult
	bytes int // of held
	timer *time.Timer
	err   error // of a send by the timer
	done  bool
}

func newResultSender(stream grpc.ServerStreamingServer[pluginpb.RunBatchResult], max, holdUS uint32) *resultSender {
	hold := min(time.Duration(holdUS)*time.Microsecond, maxHold)
	if max < 1 || hold <= 0 {
		max = 1
	}
	return &resultSender{stream: stream, max: int(max), hold: hold}
}

// send sends r, or holds it; last: no task follows in this call.
func (o *resultSender) send(r *pluginpb.RunBatchResult, last bool) error {
	if o.max == 1 {
		return o.stream.Send(r)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	size := proto.Size(r)
	if len(o.held) > 0 && o.bytes+size > maxHeldBytes {
		if err := o.flushLocked(); err != nil {
			return err
		}
	}
	o.held = append(o.held, r)
	o.bytes += size
	if last || len(o.held) >= o.max || o.bytes >= maxHeldBytes {
		return o.flushLocked()
	}
	if len(o.held) == 1 {
		o.timer = time.AfterFunc(o.hold, o.flushLater)
	}
	return nil
}

func (o *resultSender) flushLater() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.done && o.err == nil {
		o.err = o.flushLocked()
	}
}

func (o *resultSender) flushLocked() error {
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	if len(o.held) == 0 {
		return nil
	}
	first := o.held[0]
	first.More = o.held[1:]
	o.held, o.bytes = nil, 0
	return o.stream.Send(first)
}

// close sends what is held; nothing is sent after it.
func (o *resultSender) close() error {
	if o.max == 1 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return o.err
	}
	o.done = true
	if o.err != nil {
		return o.err
	}
	return o.flushLocked()
}
