package blocks_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
)

// promised opens a disk store and promises the blocks of a 3-block file
// (not put yet): the file's manifest, its ID and its bytes.
func promised(t *testing.T) (*blocks.DiskStore, *blocks.Expectation, *blocks.Manifest, blocks.ID, []byte) {
	t.Helper()
	s, err := blocks.OpenDisk(t.TempDir(), blocks.DiskOptions{Ephemeral: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	data := make([]byte, 2*4096+100)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	m, id, err := blocks.PutFile(t.Context(), blocks.NewMemStore(), bytes.NewReader(data), 4096)
	if err != nil {
		t.Fatal(err)
	}
	e := s.Expect(append([]blocks.ID{id}, m.Blocks...))
	return s, e, m, id, data
}

func TestExpectationMet(t *testing.T) {
	s, e, m, id, data := promised(t)
	ctx := t.Context()
	for _, b := range append([]blocks.ID{id}, m.Blocks...) {
		if ok, err := s.Has(ctx, b); err != nil || !ok {
			t.Fatalf("Has(promised %s) = %v, %v; want true", b.Short(), ok, err)
		}
	}
	select {
	case <-e.Wanted():
		t.Fatal("wanted before anyone asked")
	default:
	}
	got := make(chan error, 2)
	go func() {
		b, err := s.Get(ctx, m.Blocks[1])
		if err == nil && !bytes.Equal(b, data[4096:8192]) {
			err = errors.New("Get returned other bytes")
		}
		got <- err
	}()
	go func() {
		b, err := s.ReadBlock(ctx, id, nil)
		if err == nil && blocks.Sum(b) != id {
			err = errors.New("ReadBlock returned other bytes")
		}
		got <- err
	}()
	<-e.Wanted() // the reads asked and wait
	if _, _, err := blocks.PutFile(ctx, s, bytes.NewReader(data), 4096); err != nil {
		t.Fatal(err)
	}
	e.Settle(nil)
	for range 2 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := blocks.WriteFile(ctx, s, m, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("WriteFile after the promise: %v", err)
	}
}

func TestExpectationFailed(t *testing.T) {
	s, e, m, _, _ := promised(t)
	ctx := t.Context()
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, m.Blocks[0])
		got <- err
	}()
	<-e.Wanted()
	full := syscall.ENOSPC
	e.Settle(full)
	if err := <-got; !errors.Is(err, full) {
		t.Fatalf("Get of a block whose put failed: %v; want ENOSPC", err)
	}
	// Settled: the store no longer promises what it does not hold.
	if ok, err := s.Has(ctx, m.Blocks[0]); err != nil || ok {
		t.Fatalf("Has after a failed promise = %v, %v; want false", ok, err)
	}
	if _, err := s.Get(ctx, m.Blocks[0]); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("Get after a failed promise: %v; want ErrNotFound", err)
	}
}

func TestExpectationWaitEndsWithContext(t *testing.T) {
	s, e, m, _, _ := promised(t)
	defer e.Settle(context.Canceled)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.ReadBlock(ctx, m.Blocks[2], nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadBlock of a promised block, ctx ended: %v", err)
	}
}

// A promise met with Settle(nil) but whose put wrote other bytes (the
// file changed): the promised blocks are reported missing, never served.
func TestExpectationMetByOtherBytes(t *testing.T) {
	s, e, m, _, data := promised(t)
	ctx := t.Context()
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, m.Blocks[0])
		got <- err
	}()
	<-e.Wanted()
	data[0] ^= 1
	if _, _, err := blocks.PutFile(ctx, s, bytes.NewReader(data), 4096); err != nil {
		t.Fatal(err)
	}
	e.Settle(nil)
	if err := <-got; !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("Get of a promised block never written: %v; want ErrNotFound", err)
	}
}

// Expectations made with Also share Wanted and are settled one by one.
func TestExpectationAlso(t *testing.T) {
	s, first, m, _, data := promised(t)
	ctx := t.Context()
	other := []byte("a second file, promised beside the first")
	om, oid, err := blocks.PutFile(ctx, blocks.NewMemStore(), bytes.NewReader(other), 4096)
	if err != nil {
		t.Fatal(err)
	}
	second := first.Also([]blocks.ID{oid, om.Blocks[0]})
	got := make(chan error, 1)
	go func() {
		b, err := s.Get(ctx, om.Blocks[0])
		if err == nil && !bytes.Equal(b, other) {
			err = errors.New("Get returned other bytes")
		}
		got <- err
	}()
	<-first.Wanted() // a read of the second file's block
	if _, _, err := blocks.PutFile(ctx, s, bytes.NewReader(data), 4096); err != nil {
		t.Fatal(err)
	}
	first.Settle(nil)
	if _, err := s.Get(ctx, m.Blocks[0]); err != nil {
		t.Fatalf("first file settled: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("read of the second file returned before it was settled: %v", err)
	default:
	}
	if _, _, err := blocks.PutFile(ctx, s, bytes.NewReader(other), 4096); err != nil {
		t.Fatal(err)
	}
	second.Settle(nil)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
