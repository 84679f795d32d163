package blocks_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/blocks/blockstest"
)

// logBuffer collects a store's logs for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func putN(t *testing.T, s blocks.Store, seed uint64, n, size int) []blocks.ID {
	t.Helper()
	ids := make([]blocks.ID, n)
	for i := range ids {
		id, data := blockstest.Block(seed+uint64(i), size)
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func has(t *testing.T, s blocks.Store, id blocks.ID) bool {
	t.Helper()
	ok, err := s.Has(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestPinsPersist(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	ids := putN(t, s, 1, 4, 100)
	if err := s.Pin("job-a", ids[0], ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin("job-a", ids[2]); err != nil { // Pin adds
		t.Fatal(err)
	}
	if err := s.Pin("job-b", ids[1]); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", ".hidden", "a/b", "..", "a b", strings.Repeat("x", 201)} {
		if err := s.Pin(bad, ids[0]); err == nil {
			t.Errorf("Pin(%q) accepted", bad)
		}
	}
	s.Close()

	s = openDisk(t, dir, blocks.DiskOptions{})
	for i, want := range []bool{true, true, true, false} {
		if got := s.Pinned(ids[i]); got != want {
			t.Errorf("after reopen: Pinned(ids[%d]) = %v, want %v", i, got, want)
		}
	}
	if err := s.Unpin("job-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unpin("never-pinned"); err != nil {
		t.Fatalf("Unpin(unknown) = %v", err)
	}
	s.Close()

	s = openDisk(t, dir, blocks.DiskOptions{})
	for i, want := range []bool{false, true, false, false} {
		if got := s.Pinned(ids[i]); got != want {
			t.Errorf("after Unpin and reopen: Pinned(ids[%d]) = %v, want %v", i, got, want)
		}
	}
	st, err := s.GC(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 3 || st.Blocks != 1 || st.PinnedBytes != 100 || !has(t, s, ids[1]) {
		t.Fatalf("GC(0) = %+v; only the block pinned by job-b should remain", st)
	}
}

func TestDamagedPinFileQuarantined(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	ids := putN(t, s, 1, 2, 100)
	if err := s.Pin("good", ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin("bad", ids[1]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	makeWritable(t, filepath.Join(dir, "pins", "bad"))
	if err := os.WriteFile(filepath.Join(dir, "pins", "bad"), []byte("p2pc-pin v1\nnot-an-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s = openDisk(t, dir, blocks.DiskOptions{Logger: logs.logger()})
	if !s.Pinned(ids[0]) || s.Pinned(ids[1]) {
		t.Fatalf("pins after reopen: %v", s.Pins())
	}
	if q := quarantined(t, dir); len(q) != 1 || !strings.HasPrefix(q[0], "pin-bad.") {
		t.Fatalf("quarantine = %v", q)
	}
	if !strings.Contains(logs.String(), "unreadable pin file") {
		t.Fatalf("no log of the damaged pin file:\n%s", logs.String())
	}
}

func TestGCLeastRecentlyUsedFirst(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	ids := putN(t, s, 1, 10, 1000)
	// Block i was last used 100-i minutes ago: block 0 is the oldest.
	now := time.Now()
	for i, id := range ids {
		ago := now.Add(-time.Duration(100-i) * time.Minute)
		if err := os.Chtimes(blockFile(dir, id), ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(t.Context(), ids[0]); err != nil { // block 0 is now the newest
		t.Fatal(err)
	}
	if err := s.Pin("job", ids[1]); err != nil {
		t.Fatal(err)
	}
	st, err := s.GC(t.Context(), 5000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{0: true, 1: true, 7: true, 8: true, 9: true}
	for i, id := range ids {
		if got := has(t, s, id); got != want[i] {
			t.Errorf("after GC: Has(ids[%d]) = %v, want %v", i, got, want[i])
		}
	}
	if st.Removed != 5 || st.RemovedBytes != 5000 || st.Bytes != 5000 || st.Blocks != 5 || st.Scanned != 10 {
		t.Errorf("GCStats = %+v", st)
	}
	if n, b := s.Usage(); n != 5 || b != 5000 {
		t.Errorf("Usage = %d, %d", n, b)
	}
	// Under the cap already: nothing to do.
	if st, err := s.GC(t.Context(), 5000); err != nil || st.Removed != 0 {
		t.Errorf("second GC = %+v, %v", st, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.GC(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("GC(cancelled) = %v", err)
	}
}

func TestPutRespectsCap(t *testing.T) {
	const capBytes = 10_000
	var logs logBuffer
	s := openDisk(t, t.TempDir(), blocks.DiskOptions{MaxBytes: capBytes, Logger: logs.logger()})
	pinnedID, pinnedData := blockstest.Block(999, 1000)
	if err := s.Pin("job", pinnedID); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), pinnedID, pinnedData); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		id, data := blockstest.Block(uint64(i), 1000)
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
		if _, b := s.Usage(); b > capBytes {
			t.Fatalf("after Put %d the store holds %d bytes, cap %d", i, b, capBytes)
		}
		if !has(t, s, id) {
			t.Fatalf("the block just put (%d) was collected", i)
		}
		if !has(t, s, pinnedID) {
			t.Fatalf("the pinned block was collected at Put %d", i)
		}
	}
	if strings.Contains(logs.String(), "over its cap") {
		t.Fatalf("over-cap warning without pinned overflow:\n%s", logs.String())
	}

	// Pinned data beyond the cap is kept, and logged.
	var big []blocks.ID
	for i := range 15 {
		id, _ := blockstest.Block(uint64(5000+i), 1000)
		big = append(big, id)
	}
	if err := s.Pin("big", big...); err != nil {
		t.Fatal(err)
	}
	for i := range big {
		id, data := blockstest.Block(uint64(5000+i), 1000)
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range append(big, pinnedID) {
		if !has(t, s, id) {
			t.Fatal("a pinned block was collected")
		}
	}
	if _, b := s.Usage(); b != 16_000 {
		t.Fatalf("store holds %d bytes, want 16000 (all pinned)", b)
	}
	if !strings.Contains(logs.String(), "over its cap") {
		t.Fatalf("pinned overflow not logged:\n%s", logs.String())
	}
	// Once unpinned, the next Put brings the store back under the cap.
	if err := s.Unpin("big"); err != nil {
		t.Fatal(err)
	}
	id, data := blockstest.Block(77777, 1000)
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	if _, b := s.Usage(); b > capBytes {
		t.Fatalf("after Unpin and Put the store holds %d bytes", b)
	}
}

// TestGCConcurrentWithUse runs GC while blocks are read, put and pinned.
func TestGCConcurrentWithUse(t *testing.T) {
	s := openDisk(t, t.TempDir(), blocks.DiskOptions{MaxBytes: 50_000})
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				id, data := blockstest.Block(uint64(w*1000+i), 1000)
				if i%10 == 0 { // pin first, then put: the documented order
					if err := s.Pin("w"+string(rune('a'+w)), id); err != nil {
						t.Error(err)
						return
					}
				}
				if err := s.Put(ctx, id, data); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Get(ctx, id); err != nil && !errors.Is(err, blocks.ErrNotFound) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := s.GC(ctx, 20_000); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	st, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, b := s.Usage(); n != st.Blocks || b != st.Bytes || len(st.Corrupt) != 0 {
		t.Fatalf("Usage %d/%d, Verify %+v", n, b, st)
	}
	for w := range 4 {
		for i := 0; i < 100; i += 10 {
			id, _ := blockstest.Block(uint64(w*1000+i), 1000)
			if !has(t, s, id) {
				t.Fatalf("pinned block %d/%d collected", w, i)
			}
		}
	}
}

// TestHardCap: with Hard, a store at its cap evicts unpinned blocks, least
// recently used first, and refuses what still does not fit (a Put, a
// Batch's Put, a partial file) with a FullError; partial files open count
// against the cap.
func TestHardCap(t *testing.T) {
	const size, capBytes = 1000, 4000
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{MaxBytes: capBytes, Hard: true})
	ctx := t.Context()
	full := func(what string, err error) {
		t.Helper()
		var fe *blocks.FullError
		if !errors.Is(err, blocks.ErrFull) || !errors.As(err, &fe) || fe.Cap != capBytes || fe.Need <= 0 {
			t.Fatalf("%s: err %v, want a FullError with cap %d", what, err, capBytes)
		}
	}
	old := putN(t, s, 1, 4, size)
	for i, id := range old { // old[0] is the least recently used
		ago := time.Now().Add(-time.Duration(10-i) * time.Minute)
		if err := os.Chtimes(blockFile(dir, id), ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	recent := putN(t, s, 10, 2, size) // evicts the two least recently used
	for i, id := range recent {       // recent[0] before recent[1], whatever the clock's grain
		ago := time.Now().Add(-time.Duration(2-i) * time.Minute)
		if err := os.Chtimes(blockFile(dir, id), ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	if has(t, s, old[0]) || has(t, s, old[1]) || !has(t, s, old[3]) || !has(t, s, recent[1]) {
		t.Fatal("the cap did not evict the least recently used blocks")
	}
	if err := s.Pin("job-x", old[2], old[3], recent[0], recent[1]); err != nil {
		t.Fatal(err)
	}
	id, data := blockstest.Block(20, size)
	full("Put past the cap, all pinned", s.Put(ctx, id, data))
	if has(t, s, id) {
		t.Fatal("a refused block is held")
	}
	v, err := blocks.Verify(id, data)
	if err != nil {
		t.Fatal(err)
	}
	full("Batch.Put past the cap", s.NewBatch().Put(ctx, v))
	m := &blocks.Manifest{Size: 2 * size, BlockSize: size, Blocks: []blocks.ID{id, id}}
	_, err = s.OpenPartial(ctx, m.ID(), m)
	full("OpenPartial past the cap", err)
	if n, bytes := s.Usage(); bytes > capBytes {
		t.Fatalf("%d blocks, %d bytes: over the cap %d", n, bytes, capBytes)
	}

	// The job ends: its blocks may go, and a partial file takes its room.
	if err := s.Unpin("job-x"); err != nil {
		t.Fatal(err)
	}
	p, err := s.OpenPartial(ctx, m.ID(), m)
	if err != nil {
		t.Fatalf("OpenPartial after unpin: %v", err)
	}
	// The partial's room came from the least recently used: recent[1]
	// is left. With it and one more block pinned, the store is at its cap.
	if !has(t, s, recent[1]) || has(t, s, recent[0]) {
		t.Fatal("OpenPartial did not evict the least recently used blocks")
	}
	rest := putN(t, s, 30, 1, size)
	if err := s.Pin("job-y", recent[1], rest[0]); err != nil {
		t.Fatal(err)
	}
	id2, data2 := blockstest.Block(40, size)
	full("Put while a partial file holds the room", s.Put(ctx, id2, data2))
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, id2, data2); err != nil {
		t.Fatalf("Put after the partial file went: %v", err)
	}
}
