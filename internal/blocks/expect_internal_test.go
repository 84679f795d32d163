package blocks

import (
	"context"
	"testing"
)

// TestMissThenSettle: a read that missed a promised block, and asks for
// the promise only after it was met and settled, reads again instead of
// reporting the block missing (the race TestExpectationMet once lost).
func TestMissThenSettle(t *testing.T) {
	d, err := OpenDisk(t.TempDir(), DiskOptions{Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	data := []byte("a promised block")
	id := Sum(data)
	e := d.Expect([]ID{id})
	settles := d.settles.Load() // the read begins, and misses
	if _, err := d.readAny(id, nil, checkSHA); err != ErrNotFound {
		t.Fatalf("read before the put: %v, want ErrNotFound", err)
	}
	if err := d.Put(ctx, id, data); err != nil { // the promise is met and settled
		t.Fatal(err)
	}
	e.Settle(nil)
	retry, err := d.awaitExpected(ctx, id, settles)
	if err != nil || !retry {
		t.Fatalf("awaitExpected after the settle: retry %v, %v; want a second look", retry, err)
	}
	if got, err := d.Get(ctx, id); err != nil || string(got) != string(data) {
		t.Fatalf("Get: %q, %v", got, err)
	}
	// Without a settle since the read began, a miss stays a miss.
	other := Sum([]byte("never promised"))
	if retry, err := d.awaitExpected(ctx, other, d.settles.Load()); err != nil || retry {
		t.Fatalf("awaitExpected of a block never promised: retry %v, %v; want none", retry, err)
	}
}
