package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// Have asks a peer which of ids it holds, splitting the question into
// requests of at most MaxHaveIDs IDs. has[i] answers ids[i].
func Have(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID) ([]bool, error) {
	return have(ctx, c, ids)
}

func have(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID, opts ...grpc.CallOption) ([]bool, error) {
	has := make([]bool, 0, len(ids))
	for start := 0; start < len(ids); start += MaxHaveIDs {
		chunk := ids[start:min(start+MaxHaveIDs, len(ids))]
		resp, err := c.Have(ctx, &transferpb.HaveRequest{Version: ProtocolVersion, Ids: rawIDs(chunk)}, opts...)
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
// each: b is nil when the peer answered NOT_FOUND. It checks that every
// answer names the ID asked at its position and that the stream answers
// every ID; it does not verify the data (fn does, against what it
// expects). An error from fn stops the read and is returned as is.
//
// The answers are decoded by blockCodec into pooled buffers. fn may keep b
// (returning keep true), and must then call b.release() once done with
// b.data; otherwise getStream releases b when fn returns.
func getStream(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID, fn func(i int, b *rxBlock) (keep bool, err error)) error {
	stream, err := c.Get(ctx, &transferpb.GetRequest{Version: ProtocolVersion, Ids: rawIDs(ids)}, grpc.ForceCodecV2(blockCodec{}))
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	for i := range ids {
		b := new(rxBlock)
		err := stream.RecvMsg(b)
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("get: %w: stream ended after %d of %d blocks", ErrProtocol, i, len(ids))
		}
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := checkBlock(b.id, b.status, b.data, ids[i]); err != nil {
			b.release()
			return fmt.Errorf("get: %w", err)
		}
		if b.status != transferpb.Block_OK {
			b.release()
			b = nil
		} else if b.data == nil {
			b.data = []byte{} // an empty block, not a missing one
		}
		keep, err := fn(i, b)
		if b != nil && !keep {
			b.release()
		}
		if err != nil {
			return err
		}
	}
	// Drain: a well-behaved server ends the stream here.
	var extra rxBlock
	if err := stream.RecvMsg(&extra); !errors.Is(err, io.EOF) {
		if err == nil {
			extra.release()
			return fmt.Errorf("get: %w: more answers than ids asked", ErrProtocol)
		}
		return fmt.Errorf("get: %w", err)
	}
	return nil
}

// checkBlock checks the envelope of a received Block (its id, status and
// data fields) against the ID expected at its position: the echoed ID, a
// known status, no data with NOT_FOUND, and a length within MaxBlockSize.
// It does not hash the data.
func checkBlock(rawID []byte, st transferpb.Block_Status, data []byte, want blocks.ID) error {
	id, err := blocks.IDFromBytes(rawID)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if id != want {
		return fmt.Errorf("%w: answer for %s where %s was asked", ErrProtocol, id.Short(), want.Short())
	}
	switch st {
	case transferpb.Block_OK:
		if len(data) > blocks.MaxBlockSize {
			return fmt.Errorf("block %s: %d bytes: %w", id.Short(), len(data), blocks.ErrTooLarge)
		}
	case transferpb.Block_NOT_FOUND:
		if len(data) != 0 {
			return fmt.Errorf("%w: not-found answer for %s carries %d bytes", ErrProtocol, id.Short(), len(data))
		}
	default:
		return fmt.Errorf("%w: unknown status %d for %s", ErrProtocol, st, id.Short())
	}
	return nil
}
