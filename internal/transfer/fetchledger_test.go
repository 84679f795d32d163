package transfer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
)

func testLedger(peers int, units []unit) *ledger {
	opts := FetchOptions{PerPeer: 4, MaxPeerFailures: 3, BatchBytes: 100}.withDefaults()
	l := newLedger(blocks.ID{}, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range peers {
		l.addPeer(fmt.Sprintf("peer%d", i), nil, nil)
	}
	l.start(units)
	return l
}

// TestLedgerPenalise: how a failed request scores its peer.
func TestLedgerPenalise(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	live := context.Background()
	tests := []struct {
		name     string
		ctx      context.Context
		errs     []error
		banned   bool
		dropped  bool
		limit    int
		timeouts int
	}{
		{name: "bad block bans", ctx: live, errs: []error{errBadBlock}, banned: true, limit: 4},
		{name: "corrupt bans", ctx: live, errs: []error{blocks.ErrCorrupt}, banned: true, limit: 4},
		{name: "resource exhausted bans", ctx: live, errs: []error{status.Error(codes.ResourceExhausted, "too big")}, banned: true, limit: 4},
		{name: "a failure cools down", ctx: live, errs: []error{io.EOF}, limit: 4},
		{name: "a timeout halves the bound", ctx: expired, errs: []error{context.DeadlineExceeded}, limit: 2, timeouts: 1},
		{name: "two timeouts quarter it", ctx: expired, errs: []error{context.DeadlineExceeded, context.DeadlineExceeded}, limit: 1, timeouts: 2},
		{name: "MaxPeerFailures in a row drop", ctx: live, errs: []error{io.EOF, io.EOF, io.EOF}, dropped: true, limit: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := testLedger(1, nil)
			p := l.peers[0]
			for _, err := range tc.errs {
				l.penalise(tc.ctx, p, err)
			}
			if p.banned != tc.banned || p.dropped != tc.dropped || p.limit != tc.limit || p.stats.Timeouts != tc.timeouts {
				t.Errorf("banned %v dropped %v limit %d timeouts %d, want %v %v %d %d", p.banned, p.dropped, p.limit, p.stats.Timeouts, tc.banned, tc.dropped, tc.limit, tc.timeouts)
			}
			if !tc.banned && !p.cooldown.After(time.Now()) {
				t.Errorf("no cool-down after a failure")
			}
			if p.live() == (tc.banned || tc.dropped) {
				t.Errorf("live %v", p.live())
			}
		})
	}
}

// TestLedgerPick: a request takes a pending block with a ready holder and
// more blocks of that holder up to BatchBytes.
func TestLedgerPick(t *testing.T) {
	units := func(sizes ...int) []unit {
		us := make([]unit, len(sizes))
		for i, s := range sizes {
			us[i] = unit{id: blocks.ID{byte(i + 1)}, size: s, idx: []int{i}}
		}
		return us
	}
	tests := []struct {
		name  string
		sizes []int
		holds [][]int // per peer: the units it holds
		busy  []int
		want  int // units in the request (0: none)
	}{
		{name: "nobody holds anything", sizes: []int{10, 10}, holds: [][]int{nil}, want: 0},
		{name: "one holder, batched", sizes: []int{10, 10, 10}, holds: [][]int{{0, 1, 2}}, want: 3},
		{name: "batch bounded by BatchBytes", sizes: []int{60, 60, 60}, holds: [][]int{{0, 1, 2}}, want: 1},
		{name: "busy units skipped", sizes: []int{10, 10, 10}, holds: [][]int{{0, 1, 2}}, busy: []int{0, 1}, want: 1},
		{name: "all busy", sizes: []int{10}, holds: [][]int{{0}}, busy: []int{0}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := testLedger(len(tc.holds), units(tc.sizes...))
			for pi, us := range tc.holds {
				l.answered(context.Background(), context.Background(), question{p: l.peers[pi], units: us}, trues(len(us)), nil)
			}
			for _, u := range tc.busy {
				l.units[u].busy = true
			}
			l.mu.Lock()
			j, _ := l.pickLocked(time.Now())
			l.mu.Unlock()
			got := 0
			if j != nil {
				got = len(j.units)
				for _, u := range j.units {
					if !l.units[u].busy || !j.peer.has[u] {
						t.Errorf("unit %d in the request: busy %v, held %v", u, l.units[u].busy, j.peer.has[u])
					}
				}
				if j.peer.inflight != 1 || l.inflight != 1 {
					t.Errorf("inflight %d/%d after a pick", j.peer.inflight, l.inflight)
				}
			}
			if got != tc.want {
				t.Fatalf("request of %d units, want %d", got, tc.want)
			}
		})
	}
}

// TestLedgerWritten: a written unit leaves pending; it is done at once
// without a batch, or when committed.
func TestLedgerWritten(t *testing.T) {
	for _, batched := range []bool{false, true} {
		l := testLedger(1, []unit{{size: 10, idx: []int{0, 3}}, {size: 5, idx: []int{1}}})
		p := l.peers[0]
		n := l.written(p, 0, !batched)
		if len(l.pending) != 1 || l.pending[0] != 1 || l.pos[1] != 0 {
			t.Fatalf("pending %v pos %v", l.pending, l.pos)
		}
		if batched {
			if n != 0 || l.units[0].done {
				t.Fatalf("batched: done before the commit (%d bytes)", n)
			}
			n = l.committed([]int{0})
		}
		if n != 20 || !l.units[0].done || l.stats.Fetched != 1 || l.stats.FetchedBytes != 10 {
			t.Errorf("batched %v: %d bytes of the file, done %v, fetched %d/%d", batched, n, l.units[0].done, l.stats.Fetched, l.stats.FetchedBytes)
		}
		if again := l.committed([]int{0}); again != 0 {
			t.Errorf("batched %v: a unit counted twice (%d bytes)", batched, again)
		}
	}
}

func trues(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}
