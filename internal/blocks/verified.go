package blocks

import "context"

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
