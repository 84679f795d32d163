package transfer

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
)

// Protocol limits. A server rejects a request over a limit with
// InvalidArgument; a client never sends one.
const (
	// ProtocolVersion is the version of p2pc.blocks.v1 this package speaks.
	ProtocolVersion = 1
	// MaxHaveIDs bounds the IDs in one Have request.
	MaxHaveIDs = 4096
	// MaxGetIDs bounds the IDs in one Get request.
	MaxGetIDs = 256
	// MaxMessageSize bounds every gRPC message of the protocol, either
	// way: one block of MaxBlockSize bytes plus its envelope. A Have
	// request of MaxHaveIDs IDs (about 140 KiB) fits easily.
	MaxMessageSize = blocks.MaxBlockSize + 64<<10
)

// Flow-control and buffer sizes. Blocks are large (1 MiB by default), so
// static windows well above one block keep several blocks in flight per
// connection; gRPC's defaults (64 KiB windows, 32 KiB buffers) cap a
// loopback stream far below what the disks can do.
const (
	streamWindow = 8 << 20
	connWindow   = 32 << 20
	ioBuffer     = 256 << 10
)

// GRPCServerOptions returns the options a grpc.Server that hosts the
// Blocks service needs: mutual TLS with serverTLS (a trust.Creds'
// ServerTLS; required: there is no plaintext; refused handshakes are
// logged to log once per address), message bounds and windows
// sized for blocks.
func GRPCServerOptions(serverTLS *tls.Config, log *slog.Logger) []grpc.ServerOption {
	if serverTLS == nil {
		panic("transfer: GRPCServerOptions without TLS")
	}
	return []grpc.ServerOption{
		grpc.Creds(serverCreds(serverTLS, log)),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.WriteBufferSize(ioBuffer),
		grpc.ReadBufferSize(ioBuffer),
		grpc.MaxConcurrentStreams(256),
		// Block messages are encoded without copying their data; every
		// other message as gRPC's proto codec does (see blockCodec).
		grpc.ForceServerCodecV2(blockCodec{}),
	}
}

// DialOptions returns the client options for talking to a Blocks server:
// mutual TLS with clientTLS (a trust.Creds' ClientTLS; required), the
// same message bounds and windows as the server.
func DialOptions(clientTLS *tls.Config) []grpc.DialOption {
	if clientTLS == nil {
		panic("transfer: DialOptions without TLS")
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithWriteBufferSize(ioBuffer),
		grpc.WithReadBufferSize(ioBuffer),
	}
}

// ErrProtocol is wrapped by every error about a peer breaking the
// protocol: an answer for an ID that was not asked, a bitmap of the wrong
// length, a stream that ends before every ID was answered.
var ErrProtocol = errors.New("block protocol violation")

// parseIDs validates the version and IDs of a request. Its errors are
// gRPC status errors, ready to return from a handler.
func parseIDs(version uint32, raw [][]byte, limit int) ([]blocks.ID, error) {
	if version > ProtocolVersion {
		return nil, status.Errorf(codes.FailedPrecondition, "protocol version %d not supported (server speaks %d)", version, ProtocolVersion)
	}
	if len(raw) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no ids")
	}
	if len(raw) > limit {
		return nil, status.Errorf(codes.InvalidArgument, "%d ids, limit %d", len(raw), limit)
	}
	ids := make([]blocks.ID, len(raw))
	for i, b := range raw {
		if len(b) != blocks.IDSize {
			return nil, status.Errorf(codes.InvalidArgument, "ids[%d]: %d bytes, want %d", i, len(b), blocks.IDSize)
		}
		copy(ids[i][:], b)
	}
	return ids, nil
}

// rawIDs converts IDs for a request.
func rawIDs(ids []blocks.ID) [][]byte {
	raw := make([][]byte, len(ids))
	for i := range ids {
		raw[i] = ids[i][:]
	}
	return raw
}

// bitmap packs has into the HaveResponse bitmap format.
func bitmap(has []bool) []byte {
	b := make([]byte, (len(has)+7)/8)
	for i, h := range has {
		if h {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

// unpackBitmap checks that b answers n IDs and unpacks it.
func unpackBitmap(b []byte, n int) ([]bool, error) {
	if len(b) != (n+7)/8 {
		return nil, fmt.Errorf("%w: have bitmap of %d bytes for %d ids", ErrProtocol, len(b), n)
	}
	has := make([]bool, n)
	for i := range has {
		has[i] = b[i/8]&(1<<(i%8)) != 0
	}
	return has, nil
}
