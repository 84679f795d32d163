package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// ErrReadOnly is returned by the RemoteStore methods the protocol has no
// message for: peers pull blocks, nobody pushes or deletes them remotely.
var ErrReadOnly = errors.New("remote block store is read-only")

// RemoteStore is a read-only blocks.Store view of one peer. Has and Get go
// over the wire (Get verifies what it receives); Put and Delete fail with
// ErrReadOnly and List with errors.ErrUnsupported, since the protocol
// deliberately lets nobody enumerate a peer's blocks.
type RemoteStore struct {
	target string
	client transferpb.BlocksClient
}

var _ blocks.Store = (*RemoteStore)(nil)

// NewRemoteStore returns a view of the peer at target through pool.
func NewRemoteStore(pool *Pool, target string) (*RemoteStore, error) {
	c, err := pool.Blocks(target)
	if err != nil {
		return nil, fmt.Errorf("remote store %s: %w", target, err)
	}
	return &RemoteStore{target: target, client: c}, nil
}

// Target returns the peer's address.
func (r *RemoteStore) Target() string { return r.target }

// Has asks the peer whether it holds id.
func (r *RemoteStore) Has(ctx context.Context, id blocks.ID) (bool, error) {
	has, err := Have(ctx, r.client, []blocks.ID{id})
	if err != nil {
		return false, fmt.Errorf("remote %s: has %s: %w", r.target, id.Short(), ctxErr(ctx, err))
	}
	return has[0], nil
}

// Get fetches id from the peer and verifies it: ErrNotFound if the peer
// does not hold it, an error wrapping ErrCorrupt or ErrTooLarge if what
// came back is not the block.
func (r *RemoteStore) Get(ctx context.Context, id blocks.ID) ([]byte, error) {
	var out []byte
	err := getStream(ctx, r.client, []blocks.ID{id}, func(_ int, b *rxBlock) (bool, error) {
		if b == nil {
			return false, fmt.Errorf("block %s: %w", id.Short(), blocks.ErrNotFound)
		}
		if err := blocks.CheckBlock(id, b.data); err != nil {
			return false, err
		}
		out = append([]byte(nil), b.data...) // b's buffer goes back to the pool
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w", r.target, ctxErr(ctx, err))
	}
	return out, nil
}

// ctxErr prefers ctx's own error to the gRPC status that reports it, so
// that callers can test for context.Canceled with errors.Is.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// Put fails with ErrReadOnly.
func (r *RemoteStore) Put(context.Context, blocks.ID, []byte) error {
	return fmt.Errorf("remote %s: put: %w", r.target, ErrReadOnly)
}

// Delete fails with ErrReadOnly.
func (r *RemoteStore) Delete(context.Context, blocks.ID) error {
	return fmt.Errorf("remote %s: delete: %w", r.target, ErrReadOnly)
}

// List fails with errors.ErrUnsupported.
func (r *RemoteStore) List(context.Context, func(blocks.ID, int64) error) error {
	return fmt.Errorf("remote %s: list: %w", r.target, errors.ErrUnsupported)
}
