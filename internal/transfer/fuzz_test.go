package transfer

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// FuzzBlockMessage feeds arbitrary bytes to every decoder of the protocol,
// on both sides: the server's request validation and Have handler, and the
// client's checks of Block messages and Have bitmaps. None may panic, and
// what they accept must be well-formed.
func FuzzBlockMessage(f *testing.F) {
	id := blocks.Sum([]byte("block"))
	for _, m := range []proto.Message{
		&transferpb.Block{Id: id[:], Data: []byte("block")},
		&transferpb.Block{Id: id[:], Status: transferpb.Block_NOT_FOUND},
		&transferpb.Block{Id: id[:31], Status: 7, Data: []byte("x")},
		&transferpb.GetRequest{Version: 1, Ids: [][]byte{id[:], id[:]}},
		&transferpb.HaveRequest{Version: 2, Ids: [][]byte{id[:5]}},
		&transferpb.HaveResponse{Version: 1, Bitmap: []byte{0xff, 1}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})

	store := blocks.NewMemStore()
	if err := store.Put(context.Background(), id, []byte("block")); err != nil {
		f.Fatal(err)
	}
	svc := &service{s: NewServer(store, ServerOptions{})}

	f.Fuzz(func(t *testing.T, b []byte) {
		var blk transferpb.Block
		if proto.Unmarshal(b, &blk) == nil {
			if err := checkBlockMessage(&blk, id); err == nil {
				if blk.GetStatus() == transferpb.Block_OK && len(blk.GetData()) > blocks.MaxBlockSize {
					t.Fatal("oversized block accepted")
				}
			}
		}
		var get transferpb.GetRequest
		if proto.Unmarshal(b, &get) == nil {
			if ids, err := parseIDs(get.GetVersion(), get.GetIds(), MaxGetIDs); err == nil && (len(ids) == 0 || len(ids) > MaxGetIDs) {
				t.Fatalf("accepted %d ids", len(ids))
			}
		}
		var have transferpb.HaveRequest
		if proto.Unmarshal(b, &have) == nil {
			resp, err := svc.Have(context.Background(), &have)
			if err == nil {
				if _, err := unpackBitmap(resp.GetBitmap(), len(have.GetIds())); err != nil {
					t.Fatalf("server's own answer does not decode: %v", err)
				}
			}
		}
		var hr transferpb.HaveResponse
		if proto.Unmarshal(b, &hr) == nil {
			for _, n := range []int{0, 1, 8, 9, 4096} {
				_, _ = unpackBitmap(hr.GetBitmap(), n)
			}
		}
	})
}
