package blocks

import (
	"context"
	"fmt"
	"sync"
)

// Expectation is a promise that a DiskStore will hold a set of blocks it
// may not hold yet: the blocks and the manifest of a file whose manifest
// is known (remembered from an earlier run) before the file is put. Until
// Settle, Has reports the promised blocks as held, and a Get or ReadBlock
// of one that is not on disk yet signals Wanted and waits for Settle
// instead of reporting ErrNotFound; after Settle(nil) it reads the block
// as any other (verified as any other), after Settle(err) it fails with
// err. Whoever made the expectation puts the file once it is Wanted (or
// at once) and must Settle it in every case, a cancelled run included.
type Expectation struct {
	d    *DiskStore
	ids  []ID
	want *wanted // shared with the expectations made by Also
	done chan struct{}
	err  error // set before done is closed
}

// wanted is closed at the first read of a promised block not held.
type wanted struct {
	c    chan struct{}
	once sync.Once
}

// Expect promises ids (see Expectation). An ID already promised by
// another open expectation is taken over by this one.
func (d *DiskStore) Expect(ids []ID) *Expectation {
	return d.expect(ids, &wanted{c: make(chan struct{})})
}

// Also promises ids as a further expectation, settled on its own (one
// file of several), whose reads close the same Wanted channel as e's.
func (e *Expectation) Also(ids []ID) *Expectation { return e.d.expect(ids, e.want) }

func (d *DiskStore) expect(ids []ID, w *wanted) *Expectation {
	e := &Expectation{d: d, ids: ids, want: w, done: make(chan struct{})}
	d.expMu.Lock()
	defer d.expMu.Unlock()
	if d.expected == nil {
		d.expected = make(map[ID]*Expectation)
	}
	for _, id := range ids {
		d.expected[id] = e
	}
	return e
}

// Wanted is closed when a Get or ReadBlock first asked for a block
// promised by e (or by an expectation e made with Also, or that made e)
// that the store does not hold yet.
func (e *Expectation) Wanted() <-chan struct{} { return e.want.c }

// Settle ends the expectation: with err nil, the blocks are in the store;
// with an error, every read waiting for a promised block fails with it.
// Either way the store stops promising the blocks: from then on it
// reports only what it holds. Only the first call counts.
func (e *Expectation) Settle(err error) {
	e.d.expMu.Lock()
	defer e.d.expMu.Unlock()
	select {
	case <-e.done:
		return
	default:
	}
	e.err = err
	close(e.done)
	for _, id := range e.ids {
		if e.d.expected[id] == e {
			delete(e.d.expected, id)
		}
	}
	e.d.settles.Add(1)
}

// expecting returns the open expectation of id, if any.
func (d *DiskStore) expecting(id ID) *Expectation {
	d.expMu.Lock()
	defer d.expMu.Unlock()
	return d.expected[id]
}

// awaitExpected waits, for a read of id that found nothing on disk, until
// the expectation of id (if any) is settled. retry is true when the read
// should be tried again: the expectation was met, or, with none open, an
// expectation was settled since the read began (settles, d.settles then),
// so the block may have landed between the read and this call. err is the
// expectation's failure or ctx's end.
func (d *DiskStore) awaitExpected(ctx context.Context, id ID, settles uint64) (retry bool, err error) {
	e := d.expecting(id)
	if e == nil {
		return d.settles.Load() != settles, nil
	}
	e.want.once.Do(func() { close(e.want.c) })
	select {
	case <-e.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if e.err != nil {
		return false, fmt.Errorf("promised block %s: %w", id.Short(), e.err)
	}
	return true, nil
}
