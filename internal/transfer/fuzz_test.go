package transfer

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
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
		// blockCodec's decoder agrees with proto.Unmarshal.
		var rx rxBlock
		rxErr := decodeBlock(b, &rx)
		var blk transferpb.Block
		pbErr := proto.Unmarshal(b, &blk)
		if (rxErr == nil) != (pbErr == nil) {
			t.Fatalf("decodeBlock: %v, proto.Unmarshal: %v", rxErr, pbErr)
		}
		if rxErr == nil && (!bytes.Equal(rx.id, blk.GetId()) || rx.status != blk.GetStatus() || !bytes.Equal(rx.data, blk.GetData())) {
			t.Fatalf("decodeBlock read id %x status %d data %x; proto.Unmarshal %x %d %x", rx.id, rx.status, rx.data, blk.GetId(), blk.GetStatus(), blk.GetData())
		}
		if pbErr == nil {
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

// TestBlockCodecWire checks that blockCodec puts on the wire exactly what
// proto.Marshal does, for the Block messages a server sends through it
// without copying, and decodes them back.
func TestBlockCodecWire(t *testing.T) {
	id := blocks.Sum([]byte("x"))
	for _, b := range []*transferpb.Block{
		{Id: id[:], Data: bytes.Repeat([]byte("block"), 100000)},
		{Id: id[:], Data: []byte("b")},
		{Id: id[:], Data: []byte{}},
		{Id: id[:], Status: transferpb.Block_NOT_FOUND},
	} {
		want, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		bp := getBuf(len(b.Data))
		copy(*bp, b.Data)
		tx := &txBlock{Block: &transferpb.Block{Id: b.Id, Status: b.Status, Data: (*bp)[:len(b.Data)]}, buf: bp}
		out, err := blockCodec{}.Marshal(tx)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%d-byte block: codec wrote %d bytes, proto.Marshal %d", len(b.Data), len(got), len(want))
		}
		if !tx.taken.Load() {
			t.Error("codec did not take the buffer")
		}
		var rx rxBlock
		if err := (blockCodec{}).Unmarshal(out, &rx); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rx.id, b.Id) || rx.status != b.Status || !bytes.Equal(rx.data, b.Data) {
			t.Errorf("round trip of a %d-byte block differs", len(b.Data))
		}
		rx.release()
		out.Free()
	}
}

// TestBlockCodecAligns: blockCodec places a received block's data on a
// 4 KiB boundary, for direct I/O.
func TestBlockCodecAligns(t *testing.T) {
	id := blocks.Sum([]byte("x"))
	for _, st := range []transferpb.Block_Status{transferpb.Block_OK, 7} {
		b := &transferpb.Block{Id: id[:], Status: st, Data: bytes.Repeat([]byte{1}, 1<<20)}
		enc, _ := proto.Marshal(b)
		var rx rxBlock
		if err := (blockCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(enc)}, &rx); err != nil {
			t.Fatal(err)
		}
		if a := uintptr(unsafe.Pointer(&rx.data[0])) % 4096; a != 0 || !bytes.Equal(rx.data, b.Data) {
			t.Errorf("status %d: data at %d mod 4096", st, a)
		}
		rx.release()
	}
}

// checkBlockMessage checks a received Block's envelope against the ID
// expected at its position, as the fetcher does; see checkBlock.
func checkBlockMessage(msg *transferpb.Block, want blocks.ID) error {
	return checkBlock(msg.GetId(), msg.GetStatus(), msg.GetData(), want)
}
