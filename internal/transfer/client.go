package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// Have asks a peer which of ids it holds, splitting the question into
// requests of at most MaxHaveIDs IDs. has[i] answers ids[i].
func Have(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID) ([]bool, error) {
	has := make([]bool, 0, len(ids))
	for start := 0; start < len(ids); start += MaxHaveIDs {
		chunk := ids[start:min(start+MaxHaveIDs, len(ids))]
		resp, err := c.Have(ctx, &transferpb.HaveRequest{Version: ProtocolVersion, Ids: rawIDs(chunk)})
		if err != nil {
			return nil, fmt.Errorf("have: %w", err)
		}
		h, err := unpackBitmap(resp.GetBitmap(), len(chunk))
		if err != nil {
			return nil, fmt.Errorf("have: %w", err)
		}
		has = append(has, h...)
	}
	return has, nil
}

// getStream reads the answers to a Get of ids, in order, calling fn for
// each: data is nil when the peer answered NOT_FOUND. It checks that every
// answer names the ID asked at its position and that the stream answers
// every ID; it does not verify the data (fn does, against what it
// expects). An error from fn stops the read and is returned as is.
func getStream(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID, fn func(i int, data []byte) error) error {
	stream, err := c.Get(ctx, &transferpb.GetRequest{Version: ProtocolVersion, Ids: rawIDs(ids)})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	for i := range ids {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("get: %w: stream ended after %d of %d blocks", ErrProtocol, i, len(ids))
		}
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := checkBlockMessage(msg, ids[i]); err != nil {
			return fmt.Errorf("get: %w", err)
		}
		var data []byte
		if msg.GetStatus() == transferpb.Block_OK {
			data = msg.GetData()
			if data == nil {
				data = []byte{} // an empty block, not a missing one
			}
		}
		if err := fn(i, data); err != nil {
			return err
		}
	}
	// Drain: a well-behaved server ends the stream here.
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("get: %w: more answers than ids asked", ErrProtocol)
		}
		return fmt.Errorf("get: %w", err)
	}
	return nil
}

// checkBlockMessage checks a received Block's envelope against the ID
// expected at its position: the echoed ID, a known status, no data with
// NOT_FOUND, and a length within MaxBlockSize. It does not hash the data.
func checkBlockMessage(msg *transferpb.Block, want blocks.ID) error {
	id, err := blocks.IDFromBytes(msg.GetId())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if id != want {
		return fmt.Errorf("%w: answer for %s where %s was asked", ErrProtocol, id.Short(), want.Short())
	}
	switch msg.GetStatus() {
	case transferpb.Block_OK:
		if len(msg.GetData()) > blocks.MaxBlockSize {
			return fmt.Errorf("block %s: %d bytes: %w", id.Short(), len(msg.GetData()), blocks.ErrTooLarge)
		}
	case transferpb.Block_NOT_FOUND:
		if len(msg.GetData()) != 0 {
			return fmt.Errorf("%w: not-found answer for %s carries %d bytes", ErrProtocol, id.Short(), len(msg.GetData()))
		}
	default:
		return fmt.Errorf("%w: unknown status %d for %s", ErrProtocol, msg.GetStatus(), id.Short())
	}
	return nil
}
