package swarmjobs

import (
	"fmt"
	"runtime"
	"testing"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// TestHeldJobMemory measures what a successor keeps in memory per job it
// holds: 20 jobs, each a bundle of 1 MiB and 5 journal copies (a
// 256 KiB job.db and 8 task outputs each), received through Hold; the
// live heap after a collection grows by the records and their entries
// only, since every copy goes to disk. p2pc bench --suite takeover
// measures the same on real members (RSS and gctrace).
func TestHeldJobMemory(t *testing.T) {
	s := testService(t, Config{})
	ctx, owner := asNode(t)
	const jobs, copies = 20, 5
	plugin, db, out := make([]byte, 1<<20), make([]byte, 256<<10), make([]byte, 2<<10)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var received int64
	var before uint64
	for j := range jobs + 1 {
		if j == 1 { // the first job warmed up what a first Hold sets up
			before, received = heap(), 0
		}
		rec := &pb.Record{Id: fmt.Sprintf("%064x", j+1), Name: "held", State: StateRunning, Epoch: 1, Owner: "o", OwnerId: owner.String(), Holders: []string{"me", "other"}, Total: 2048}
		msgs := append(fileMsgs(SpecFile, []byte("name: held\n"), nil), fileMsgs(PluginFile, plugin, nil)...)
		if err := s.Hold(hold(ctx, KindJob, rec, msgs...)); err != nil {
			t.Fatalf("job %d: bundle: %v", j, err)
		}
		received += int64(len(plugin))
		for c := range copies {
			var msgs []*pb.Bundle
			for k := range 8 {
				msgs = append(msgs, fileMsgs(fmt.Sprintf("tasks/%04d/out", c*8+k), out, nil)...)
				received += int64(len(out))
			}
			msgs = append(msgs, fileMsgs(journalFile, db, nil)...)
			received += int64(len(db))
			rec.Done = int64(c * 8)
			if err := s.Hold(hold(ctx, KindState, rec, msgs...)); err != nil {
				t.Fatalf("job %d: journal copy %d: %v", j, c, err)
			}
		}
	}
	if n := len(s.jobs); n != jobs+1 {
		t.Fatalf("%d jobs held, want %d", n, jobs+1)
	}
	perJob := (float64(heap()) - float64(before)) / jobs
	runtime.KeepAlive(plugin) // live at both measures: not counted
	runtime.KeepAlive(db)
	runtime.KeepAlive(out)
	t.Logf("a held job keeps %.0f bytes of live heap (%d jobs; %.1f MiB received each)", perJob, jobs, float64(received)/jobs/(1<<20))
	// The bound: far below what was received (2.3 MiB a job); a holder
	// that kept a copy's bytes in memory would exceed it by 10 times.
	if perJob > 64<<10 {
		t.Errorf("a held job keeps %.0f bytes of live heap, want under 64 KiB: copies are meant to go to disk", perJob)
	}
}
