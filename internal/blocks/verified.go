package blocks

import (
	"context"

	"github.com/p2pc/p2pc/internal/multisha"
)

// Verified is a block whose bytes have been checked against its ID. The
// only ways to get one are Verify, which hashes the bytes, and this
// package's own code paths that have just computed the ID from the bytes
// (PutFile). A store that implements VerifiedPutter stores a Verified
// block without hashing it again: a block that crossed the network is
// hashed exactly once on receipt, not again by the store.
//
// A Verified holds the caller's slice: the caller must not modify the
// bytes between Verify and the Put that consumes it.
type Verified struct {
	id   ID
	data []byte
}

// Verify checks data against id (CheckBlock: ErrTooLarge, ErrCorrupt) and
// returns it as a Verified block.
func Verify(id ID, data []byte) (Verified, error) {
	if err := CheckBlock(id, data); err != nil {
		return Verified{}, err
	}
	return Verified{id: id, data: data}, nil
}

// VerifyAll is Verify of each data[i] against ids[i], with the blocks of
// equal length hashed together (multisha.SumEqual, many at once where the
// processor allows). ok[i] holds the verified blocks; errs[i] is
// non-nil for the others.
func VerifyAll(ids []ID, data [][]byte, ok []Verified, errs []error) {
	if len(data) != len(ids) || len(ok) != len(ids) || len(errs) != len(ids) {
		panic("blocks: VerifyAll: slices of different lengths")
	}
	var sums [multisha.Lanes][multisha.Size]byte
	var msgs [multisha.Lanes][]byte
	var at [multisha.Lanes]int
	done := make([]bool, len(ids))
	for i := range ids {
		if done[i] {
			continue
		}
		// Gather up to Lanes blocks of data[i]'s length, from i on.
		k := 0
		for j := i; j < len(ids) && k < multisha.Lanes; j++ {
			if done[j] || len(data[j]) != len(data[i]) {
				continue
			}
			done[j] = true
			if err := checkLen(ids[j], len(data[j])); err != nil {
				ok[j], errs[j] = Verified{}, err
				continue
			}
			msgs[k], at[k] = data[j], j
			k++
		}
		multisha.SumEqual(sums[:k], msgs[:k])
		for n, j := range at[:k] {
			if err := checkSum(ids[j], ID(sums[n])); err != nil {
				ok[j], errs[j] = Verified{}, err
				continue
			}
			ok[j], errs[j] = Verified{id: ids[j], data: data[j]}, nil
		}
		clear(msgs[:k])
	}
}

// trusted wraps bytes whose ID the caller has just computed from them.
func trusted(id ID, data []byte) Verified { return Verified{id: id, data: data} }

// ID returns the block's ID.
func (v Verified) ID() ID { return v.id }

// Data returns the block's bytes (the slice given to Verify, not a copy).
func (v Verified) Data() []byte { return v.data }

// Len returns the block's length.
func (v Verified) Len() int { return len(v.data) }

// VerifiedPutter is implemented by stores that can store a Verified block
// without re-hashing it (MemStore, DiskStore). PutVerified has Put's
// contract otherwise: idempotent, ErrTooLarge, a done context fails it.
type VerifiedPutter interface {
	PutVerified(ctx context.Context, v Verified) error
}

// PutVerified stores v in s: through s.PutVerified when s implements
// VerifiedPutter, else with s.Put (which verifies again).
func PutVerified(ctx context.Context, s Store, v Verified) error {
	if vp, ok := s.(VerifiedPutter); ok {
		return vp.PutVerified(ctx, v)
	}
	return s.Put(ctx, v.id, v.data)
}
