package sdk

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// fakeStream records what a RunBatch handler sends.
type fakeStream struct {
	grpc.ServerStream
	mu   sync.Mutex
	msgs [][]uint32 // the indexes each message carried
	sent chan struct{}
}

func (f *fakeStream) Send(r *pluginpb.RunBatchResult) error {
	idx := []uint32{r.Index}
	for _, m := range r.More {
		idx = append(idx, m.Index)
	}
	f.mu.Lock()
	f.msgs = append(f.msgs, idx)
	f.mu.Unlock()
	select {
	case f.sent <- struct{}{}:
	default:
	}
	return nil
}

func (f *fakeStream) Context() context.Context { return context.Background() }

func (f *fakeStream) got() [][]uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]uint32(nil), f.msgs...)
}

func result(i int, data int) *pluginpb.RunBatchResult {
	return &pluginpb.RunBatchResult{Index: uint32(i), Response: &pluginpb.RunResponse{Data: make([]byte, data)}}
}

// TestResultSender: results go in order, several to a message only when
// the host asked, never more than it asked or than maxHeldBytes, and
// the last result of a call is never held.
func TestResultSender(t *testing.T) {
	for _, c := range []struct {
		name      string
		max, hold uint32
		sizes     []int
		want      [][]uint32
	}{
		{"alone by default", 0, 0, []int{1, 1, 1}, [][]uint32{{0}, {1}, {2}}},
		{"alone without a hold", 8, 0, []int{1, 1}, [][]uint32{{0}, {1}}},
		{"by max", 3, 1e6, []int{1, 1, 1, 1, 1, 1, 1}, [][]uint32{{0, 1, 2}, {3, 4, 5}, {6}}},
		{"by bytes", 64, 1e6, []int{600 << 10, 600 << 10, 10, 2 << 20, 10}, [][]uint32{{0}, {1, 2}, {3}, {4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeStream{sent: make(chan struct{}, 1)}
			o := newResultSender(f, c.max, c.hold)
			for i, n := range c.sizes {
				if err := o.send(result(i, n), i == len(c.sizes)-1); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.close(); err != nil {
				t.Fatal(err)
			}
			got := f.got()
			if len(got) != len(c.want) {
				t.Fatalf("messages %v, want %v", got, c.want)
			}
			for i := range got {
				if len(got[i]) != len(c.want[i]) {
					t.Fatalf("messages %v, want %v", got, c.want)
				}
				for j := range got[i] {
					if got[i][j] != c.want[i][j] {
						t.Fatalf("messages %v, want %v", got, c.want)
					}
				}
			}
		})
	}
}

// TestResultSenderHold: a held result goes out by itself once it waited
// its hold, while the next task still runs; nothing is sent after close.
func TestResultSenderHold(t *testing.T) {
	f := &fakeStream{sent: make(chan struct{}, 1)}
	o := newResultSender(f, 64, 2000) // 2 ms
	start := time.Now()
	if err := o.send(result(0, 1), false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.sent:
	case <-time.After(5 * time.Second):
		t.Fatal("a held result was not sent by its hold")
	}
	if d := time.Since(start); d < 2*time.Millisecond {
		t.Errorf("sent after %v, before its hold", d)
	}
	if err := o.send(result(1, 1), false); err != nil {
		t.Fatal(err)
	}
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	if got := f.got(); len(got) != 2 || got[0][0] != 0 || got[1][0] != 1 {
		t.Fatalf("messages %v", got)
	}
}
