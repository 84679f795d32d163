package transfer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// Block buffers. A fetch receives every block into a buffer from this
// pool and a server reads every block it sends into one, so that moving a
// file costs no allocation (and no zeroing, no garbage) per block.
// Buffers larger than pooledMax (blocks of more than 1 MiB) are not kept.
const pooledMax = blocks.DefaultBlockSize + 64<<10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, pooledMax); return &b }}

// getBuf returns a buffer of length n.
func getBuf(n int) *[]byte {
	if n > pooledMax || n < 64<<10 {
		b := make([]byte, n)
		return &b
	}
	bp := bufPool.Get().(*[]byte)
	*bp = (*bp)[:n]
	return bp
}

// putBuf gives a buffer from getBuf back. The caller must not use it
// afterwards.
func putBuf(bp *[]byte) {
	if bp == nil || cap(*bp) != pooledMax {
		return
	}
	*bp = (*bp)[:0]
	bufPool.Put(bp)
}

// rxBlock is a received Block message, decoded by blockCodec into a pooled
// buffer: id and data alias it. Whoever holds an rxBlock must call release
// once done with its bytes.
type rxBlock struct {
	id      []byte
	status  transferpb.Block_Status
	data    []byte
	hasData bool
	buf     *[]byte
}

func (b *rxBlock) release() {
	putBuf(b.buf)
	*b = rxBlock{}
}

// txBlock is a Block message to send whose data lies in a pooled buffer.
// A server whose codec is blockCodec (GRPCServerOptions) hands the data
// to gRPC without copying it, and the buffer returns to the pool once
// gRPC has written it out; with gRPC's own codec (a server built without
// those options) the message is marshalled, copied, as the Block it
// embeds, and the sender takes the buffer back after SendMsg.
type txBlock struct {
	*transferpb.Block
	buf   *[]byte
	taken atomic.Bool // the codec took buf
}

// releaser returns a pooled buffer once gRPC frees the mem.Buffer made of
// part of it. It is a mem.BufferPool only in name: gRPC calls Put, never
// Get.
type releaser struct{ buf *[]byte }

func (r releaser) Get(int) *[]byte { panic("transfer: releaser.Get") }
func (r releaser) Put(*[]byte)     { putBuf(r.buf) }

// blockCodec is the "proto" codec with two differences. It decodes Block
// messages into an rxBlock, copying the received bytes once into a pooled
// buffer instead of twice into fresh memory (gRPC's codec assembles the
// message into one buffer, then proto.Unmarshal copies the data field out
// of it); and it encodes a txBlock as a short header followed by its data
// buffer itself, uncopied. The bytes on the wire are the same protobuf
// encoding; every other message goes through gRPC's proto codec. Clients
// select it per call with grpc.ForceCodecV2, servers with
// grpc.ForceServerCodecV2 (in GRPCServerOptions).
type blockCodec struct{}

func (blockCodec) Name() string { return protocodec.Name }

func (blockCodec) Marshal(v any) (mem.BufferSlice, error) {
	if tx, ok := v.(*txBlock); ok && tx.buf != nil && tx.taken.CompareAndSwap(false, true) {
		// Field order and presence as proto.Marshal writes them.
		b := tx.Block
		hdr := protowire.AppendTag(make([]byte, 0, 48), 1, protowire.BytesType)
		hdr = protowire.AppendBytes(hdr, b.Id)
		if b.Status != 0 {
			hdr = protowire.AppendTag(hdr, 2, protowire.VarintType)
			hdr = protowire.AppendVarint(hdr, uint64(int64(b.Status)))
		}
		if len(b.Data) == 0 {
			putBuf(tx.buf)
			return mem.BufferSlice{mem.SliceBuffer(hdr)}, nil
		}
		hdr = protowire.AppendTag(hdr, 3, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(len(b.Data)))
		data := b.Data
		return mem.BufferSlice{mem.SliceBuffer(hdr), mem.NewBuffer(&data, releaser{tx.buf})}, nil
	}
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}

func (blockCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*rxBlock)
	if !ok {
		return encoding.GetCodecV2(protocodec.Name).Unmarshal(data, v)
	}
	n := data.Len()
	if n > MaxMessageSize {
		return fmt.Errorf("block message of %d bytes: %w", n, blocks.ErrTooLarge)
	}
	// Place the message so that its data field starts on a 4 KiB
	// boundary: a file assembled in place is written with direct I/O,
	// which takes aligned memory as it is (see blocks.Partial.WriteAt).
	bp := getBuf(n)
	pad := 0
	if n >= 4096 {
		var head [64]byte
		if off := dataOffset(head[:data.CopyTo(head[:])]); off > 0 {
			if p := alignPad(addr4k(bp) + off); p+n <= cap(*bp) {
				pad = p
			}
		}
	}
	*bp = (*bp)[:pad+n]
	data.CopyTo((*bp)[pad:])
	if err := decodeBlock((*bp)[pad:], b); err != nil {
		putBuf(bp)
		*b = rxBlock{}
		return err
	}
	b.buf = bp
	return nil
}

var errBadMessage = errors.New("malformed Block message")

// dataOffset returns where the payload of the data field (3) starts in a
// Block message whose first bytes are head, or -1 if head does not show.
func dataOffset(head []byte) int {
	pos := 0
	for pos < len(head) {
		num, typ, n := protowire.ConsumeTag(head[pos:])
		if n < 0 {
			return -1
		}
		pos += n
		if num == 3 && typ == protowire.BytesType {
			_, m := protowire.ConsumeVarint(head[pos:])
			if m < 0 {
				return -1
			}
			return pos + m
		}
		m := protowire.ConsumeFieldValue(num, typ, head[pos:])
		if m < 0 {
			return -1
		}
		pos += m
	}
	return -1
}

// alignPad returns how far to shift something at offset off to start on a
// 4 KiB boundary.
func alignPad(off int) int { return (4096 - off%4096) % 4096 }

// addr4k returns the address of a buffer's first byte, modulo 4 KiB.
func addr4k(bp *[]byte) int { return int(uintptr(unsafe.Pointer(unsafe.SliceData(*bp))) % 4096) }

// decodeBlock parses the protobuf encoding of a transferpb.Block in msg
// into b, its slices aliasing msg. It accepts what proto.Unmarshal accepts
// and reads the same values (the last occurrence of a field wins; fields
// of an unexpected wire type and unknown fields are skipped), as
// FuzzBlockMessage checks.
func decodeBlock(msg []byte, b *rxBlock) error {
	*b = rxBlock{}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: %v", errBadMessage, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: field number %d", errBadMessage, num)
		}
		msg = msg[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return fmt.Errorf("%w: id: %v", errBadMessage, protowire.ParseError(n))
			}
			b.id = v
			msg = msg[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return fmt.Errorf("%w: status: %v", errBadMessage, protowire.ParseError(n))
			}
			b.status = transferpb.Block_Status(int32(v))
			msg = msg[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return fmt.Errorf("%w: data: %v", errBadMessage, protowire.ParseError(n))
			}
			b.data, b.hasData = v, true
			msg = msg[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", errBadMessage, num, protowire.ParseError(n))
			}
			msg = msg[n:]
		}
	}
	return nil
}
