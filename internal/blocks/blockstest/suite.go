// Package blockstest is the conformance suite every blocks.Store must
// pass: memory, disk and remote stores alike. Call TestStore from a
// _test.go file of the implementation's package:
//
//	func TestConformance(t *testing.T) {
//		blockstest.TestStore(t, func(t *testing.T) blocks.Store { return newMyStore(t) })
//	}
package blockstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

// TestStore runs the conformance suite. newStore must return a new, empty
// store for each call and arrange its cleanup with t.Cleanup.
func TestStore(t *testing.T, newStore func(t *testing.T) blocks.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s blocks.Store)
	}{
		{"PutGet", testPutGet},
		{"Ownership", testOwnership},
		{"IdempotentPut", testIdempotentPut},
		{"GetMissing", testGetMissing},
		{"PutCorrupt", testPutCorrupt},
		{"Delete", testDelete},
		{"List", testList},
		{"ListStops", testListStops},
		{"MaxBlockSize", testMaxBlockSize},
		{"TooLarge", testTooLarge},
		{"Concurrent", testConcurrent},
		{"Cancelled", testCancelled},
		{"Files", testFiles},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// Block returns n pseudo-random bytes derived from seed and their ID.
func Block(seed uint64, n int) (blocks.ID, []byte) {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return blocks.Sum(b), b
}

func mustPut(t *testing.T, s blocks.Store, id blocks.ID, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", id.Short(), len(data), err)
	}
}

func mustHas(t *testing.T, s blocks.Store, id blocks.ID, want bool) {
	t.Helper()
	got, err := s.Has(t.Context(), id)
	if err != nil {
		t.Fatalf("Has(%s): %v", id.Short(), err)
	}
	if got != want {
		t.Fatalf("Has(%s) = %v, want %v", id.Short(), got, want)
	}
}

func mustGet(t *testing.T, s blocks.Store, id blocks.ID, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id.Short(), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%s) = %d bytes, not the %d put", id.Short(), len(got), len(want))
	}
}

func listAll(t *testing.T, s blocks.Store) map[blocks.ID]int64 {
	t.Helper()
	m := make(map[blocks.ID]int64)
	err := s.List(t.Context(), func(id blocks.ID, size int64) error {
		if _, dup := m[id]; dup {
			return fmt.Errorf("the List callback got %s twice", id.Short())
		}
		m[id] = size
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return m
}

func testPutGet(t *testing.T, s blocks.Store) {
	for i, n := range []int{0, 1, 1000, 64 << 10, blocks.DefaultBlockSize} {
		id, data := Block(uint64(i), n)
		mustHas(t, s, id, false)
		mustPut(t, s, id, data)
		mustHas(t, s, id, true)
		mustGet(t, s, id, data)
	}
}

func testOwnership(t *testing.T, s blocks.Store) {
	id, data := Block(1, 4096)
	orig := bytes.Clone(data)
	mustPut(t, s, id, data)
	data[0] ^= 0xff // Put must not retain data
	mustGet(t, s, id, orig)
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	got[0] ^= 0xff // the slice Get returns belongs to the caller
	mustGet(t, s, id, orig)
}

func testIdempotentPut(t *testing.T, s blocks.Store) {
	id, data := Block(2, 5000)
	for range 3 {
		mustPut(t, s, id, data)
	}
	mustGet(t, s, id, data)
	if got := listAll(t, s); len(got) != 1 || got[id] != int64(len(data)) {
		t.Fatalf("List after 3 Puts of one block = %v", got)
	}
}

func testGetMissing(t *testing.T, s blocks.Store) {
	id, _ := Block(3, 100)
	_, err := s.Get(t.Context(), id)
	if !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
	mustHas(t, s, id, false)
}

func testPutCorrupt(t *testing.T, s blocks.Store) {
	id, data := Block(4, 1000)
	_, other := Block(5, 1000)
	err := s.Put(t.Context(), id, other)
	if !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("Put(id, wrong bytes) error = %v, want ErrCorrupt", err)
	}
	mustHas(t, s, id, false)
	mustHas(t, s, blocks.Sum(other), false)
	// A flipped byte is caught too, and the right bytes are still accepted.
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 1
	if err := s.Put(t.Context(), id, bad); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("Put(id, flipped byte) error = %v, want ErrCorrupt", err)
	}
	mustPut(t, s, id, data)
	mustGet(t, s, id, data)
	if got := listAll(t, s); len(got) != 1 {
		t.Fatalf("List = %v, want only the good block", got)
	}
}

func testDelete(t *testing.T, s blocks.Store) {
	id, data := Block(6, 777)
	keep, keepData := Block(7, 777)
	mustPut(t, s, id, data)
	mustPut(t, s, keep, keepData)
	for range 2 {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	mustHas(t, s, id, false)
	if _, err := s.Get(t.Context(), id); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("Get after Delete error = %v, want ErrNotFound", err)
	}
	mustGet(t, s, keep, keepData)
	// A deleted block can be put again.
	mustPut(t, s, id, data)
	mustGet(t, s, id, data)
}

func testList(t *testing.T, s blocks.Store) {
	if got := listAll(t, s); len(got) != 0 {
		t.Fatalf("new store lists %d blocks", len(got))
	}
	want := make(map[blocks.ID]int64)
	for i := range 50 {
		id, data := Block(uint64(100+i), i*37)
		mustPut(t, s, id, data)
		want[id] = int64(len(data))
	}
	got := listAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("List returned %d blocks, want %d", len(got), len(want))
	}
	for id, size := range want {
		if got[id] != size {
			t.Errorf("List: %s size %d, want %d", id.Short(), got[id], size)
		}
	}
}

func testListStops(t *testing.T, s blocks.Store) {
	for i := range 10 {
		id, data := Block(uint64(200+i), 10)
		mustPut(t, s, id, data)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.List(t.Context(), func(blocks.ID, int64) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("List error = %v, want fn's error", err)
	}
	if calls != 1 {
		t.Fatalf("List called fn %d times after it failed, want 1", calls)
	}
}

func testMaxBlockSize(t *testing.T, s blocks.Store) {
	id, data := Block(8, blocks.MaxBlockSize)
	mustPut(t, s, id, data)
	mustGet(t, s, id, data)
}

func testTooLarge(t *testing.T, s blocks.Store) {
	id, data := Block(9, blocks.MaxBlockSize+1)
	err := s.Put(t.Context(), id, data)
	if !errors.Is(err, blocks.ErrTooLarge) {
		t.Fatalf("Put(MaxBlockSize+1 bytes) error = %v, want ErrTooLarge", err)
	}
	mustHas(t, s, id, false)
}

func testConcurrent(t *testing.T, s blocks.Store) {
	const (
		workers = 16
		shared  = 8
		ops     = 40
	)
	type blk struct {
		id   blocks.ID
		data []byte
	}
	var sh []blk
	for i := range shared {
		id, data := Block(uint64(300+i), 10_000+i)
		sh = append(sh, blk{id, data})
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 0))
			for op := range ops {
				b := sh[r.IntN(shared)]
				if err := s.Put(ctx, b.id, b.data); err != nil {
					errc <- fmt.Errorf("worker %d: Put shared: %w", w, err)
					return
				}
				got, err := s.Get(ctx, b.id)
				if err != nil || !bytes.Equal(got, b.data) {
					errc <- fmt.Errorf("worker %d: Get shared: %d bytes, %v", w, len(got), err)
					return
				}
				// A block of this worker's own: put, read back, delete.
				id, data := Block(uint64(1000+w*ops+op), 2000)
				if err := s.Put(ctx, id, data); err != nil {
					errc <- fmt.Errorf("worker %d: Put own: %w", w, err)
					return
				}
				if ok, err := s.Has(ctx, id); err != nil || !ok {
					errc <- fmt.Errorf("worker %d: Has own = %v, %v", w, ok, err)
					return
				}
				if op%2 == 0 {
					if err := s.Delete(ctx, id); err != nil {
						errc <- fmt.Errorf("worker %d: Delete own: %w", w, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	got := listAll(t, s)
	if want := shared + workers*ops/2; len(got) != want {
		t.Fatalf("after concurrent use the store lists %d blocks, want %d", len(got), want)
	}
	for _, b := range sh {
		mustGet(t, s, b.id, b.data)
	}
}

func testCancelled(t *testing.T, s blocks.Store) {
	held, heldData := Block(10, 100)
	mustPut(t, s, held, heldData)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	id, data := Block(11, 100)
	if err := s.Put(ctx, id, data); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(cancelled ctx) error = %v, want context.Canceled", err)
	}
	mustHas(t, s, id, false)
	if _, err := s.Get(ctx, held); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled ctx) error = %v, want context.Canceled", err)
	}
	if _, err := s.Has(ctx, held); !errors.Is(err, context.Canceled) {
		t.Errorf("Has(cancelled ctx) error = %v, want context.Canceled", err)
	}
	if err := s.Delete(ctx, held); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete(cancelled ctx) error = %v, want context.Canceled", err)
	}
	mustHas(t, s, held, true)
	if err := s.List(ctx, func(blocks.ID, int64) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled ctx) error = %v, want context.Canceled", err)
	}
}

func testFiles(t *testing.T, s blocks.Store) {
	const bs = 1000
	for _, size := range []int{0, 1, bs - 1, bs, bs + 1, 10*bs + 7} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			_, data := Block(uint64(size), size)
			m, file, err := blocks.PutFile(t.Context(), s, bytes.NewReader(data), bs)
			if err != nil {
				t.Fatalf("PutFile: %v", err)
			}
			if m.Size != int64(size) || len(m.Blocks) != blocks.NumBlocks(int64(size), bs) {
				t.Fatalf("manifest: size %d, %d blocks", m.Size, len(m.Blocks))
			}
			missing, err := blocks.Missing(t.Context(), s, m)
			if err != nil || len(missing) != 0 {
				t.Fatalf("Missing = %v, %v", missing, err)
			}
			m2, err := blocks.ReadManifest(t.Context(), s, file)
			if err != nil {
				t.Fatalf("ReadManifest: %v", err)
			}
			var out bytes.Buffer
			if err := blocks.WriteFile(t.Context(), s, m2, &out); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("WriteFile wrote %d bytes, not the %d put", out.Len(), len(data))
			}
		})
	}
}
