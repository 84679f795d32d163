package transfer

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
)

// ServerOptions configure a Server. The zero value serves honestly and
// without a rate cap.
type ServerOptions struct {
	// Logger receives the server's logs; nil means slog.Default(). A
	// component=transfer.server attribute is added.
	Logger *slog.Logger
	// RateLimit caps the block bytes per second the server sends, summed
	// over all streams; 0 means no cap. Benchmarks and tests use it to
	// model a slow uplink.
	RateLimit int64

	// Fault injection, FOR TESTS ONLY. Each makes the server misbehave so
	// that fetchers' defences can be exercised; a server with any of them
	// set logs a warning at start.

	// Corrupt flips bytes of every block served.
	Corrupt bool
	// Truncate serves only the first half of every block.
	Truncate bool
	// StallAfter > 0 makes the server stop answering once it has served
	// that many blocks: every later Get hangs until its caller gives up.
	StallAfter int
}

// faulty reports whether any fault injection is on.
func (o ServerOptions) faulty() bool { return o.Corrupt || o.Truncate || o.StallAfter > 0 }

// Server serves a blocks.Store over the Blocks gRPC service. It only
// reads the store.
type Server struct {
	store   blocks.Store
	opts    ServerOptions
	log     *slog.Logger
	limiter *rateLimiter

	admitted    atomic.Int64 // blocks about to be sent (for StallAfter)
	served      atomic.Int64 // blocks sent
	servedBytes atomic.Int64 // block bytes sent
	bulkServed  atomic.Int64 // of those, sent over the bulk path
	bulk        atomic.Bool  // Listener was called: Have advertises the bulk path
	unbatched   atomic.Bool  // benchmarks: bulk answers written a TLS record at a time
}

// NewServer returns a Server for store.
func NewServer(store blocks.Store, opts ServerOptions) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "transfer.server")
	if opts.faulty() {
		log.Warn("FAULT INJECTION ON: this server misbehaves on purpose (tests only)",
			"corrupt", opts.Corrupt, "truncate", opts.Truncate, "stall_after", opts.StallAfter)
	}
	return &Server{store: store, opts: opts, log: log, limiter: newRateLimiter(opts.RateLimit)}
}

// Register adds the Blocks service to g. g should be built with
// GRPCServerOptions so that block-sized messages pass.
func (s *Server) Register(g *grpc.Server) {
	transferpb.RegisterBlocksServer(g, &service{s: s})
}

// Served returns how many blocks and block bytes the server has sent.
func (s *Server) Served() (blocksSent, bytesSent int64) {
	return s.served.Load(), s.servedBytes.Load()
}

// service is the generated interface's implementation; it is kept apart
// from Server so that Server's exported methods stay its own.
type service struct {
	transferpb.UnimplementedBlocksServer
	s *Server
}

func (h *service) Have(ctx context.Context, req *transferpb.HaveRequest) (*transferpb.HaveResponse, error) {
	ids, err := parseIDs(req.GetVersion(), req.GetIds(), MaxHaveIDs)
	if err != nil {
		return nil, err
	}
	h.s.advertiseBulk(ctx)
	has := make([]bool, len(ids))
	for i, id := range ids {
		ok, err := h.s.store.Has(ctx, id)
		if err != nil {
			return nil, h.s.storeError(ctx, "have", id, err)
		}
		has[i] = ok
	}
	return &transferpb.HaveResponse{Version: ProtocolVersion, Bitmap: bitmap(has)}, nil
}

func (h *service) Get(req *transferpb.GetRequest, stream grpc.ServerStreamingServer[transferpb.Block]) error {
	s := h.s
	ctx := stream.Context()
	ids, err := parseIDs(req.GetVersion(), req.GetIds(), MaxGetIDs)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if s.stall(id) {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		msg := &transferpb.Block{Id: id[:]}
		data, bp, st, err := s.block(ctx, id)
		if err != nil {
			return err
		}
		msg.Data = data
		if st == bulkStatusNotFound {
			msg.Status = transferpb.Block_NOT_FOUND
		}
		if bp != nil {
			// With blockCodec the buffer goes to gRPC as it is and comes
			// back to the pool once written; with gRPC's codec, SendMsg
			// has copied the message into its own buffers by the time it
			// returns, and the buffer is reused at once (p2pc's servers
			// install no stats handler or tracer that would keep the
			// message for later).
			tx := &txBlock{Block: msg, buf: bp}
			err = stream.SendMsg(tx)
			if !tx.taken.Load() {
				putBuf(bp)
			}
		} else {
			err = stream.Send(msg)
		}
		if err != nil {
			return err
		}
		s.served.Add(1)
		s.servedBytes.Add(int64(len(msg.Data)))
	}
	return nil
}

// stall reports whether the server is to stop answering before id (fault
// injection: StallAfter).
func (s *Server) stall(id blocks.ID) bool {
	if s.opts.StallAfter > 0 && s.admitted.Add(1) > int64(s.opts.StallAfter) {
		s.log.Warn("fault injection: stalling", "block", id.Short())
		return true
	}
	return false
}

// block prepares the answer for id, for gRPC and the bulk path alike: the
// data (nil and status bulkStatusNotFound when the store does not hold
// it, or holds a corrupt copy), in a pooled buffer bp (nil if not pooled)
// to give back once sent, after waiting for the rate limit. Its errors
// are gRPC status errors.
func (s *Server) block(ctx context.Context, id blocks.ID) (data []byte, bp *[]byte, st byte, err error) {
	data, bp, err = s.read(ctx, id)
	switch {
	case err == nil:
		if s.opts.Corrupt || s.opts.Truncate {
			data = s.mangle(data)
			putBuf(bp)
			bp = nil
		}
	case errors.Is(err, blocks.ErrNotFound):
		st = bulkStatusNotFound
	case errors.Is(err, blocks.ErrCorrupt):
		// The store quarantined its copy; for the peer it is gone.
		s.log.Warn("store holds a corrupt copy; answered not found", "block", id.Short(), "err", err)
		st = bulkStatusNotFound
	default:
		return nil, nil, 0, s.storeError(ctx, "get", id, err)
	}
	if err := s.limiter.wait(ctx, len(data)); err != nil {
		putBuf(bp)
		return nil, nil, 0, status.FromContextError(err).Err()
	}
	return data, bp, st, nil
}

// read reads id from the store: into a pooled buffer (returned as bp, to
// give back with putBuf once sent) when the store is a blocks.BlockReader,
// else with Get. DiskStore.ReadBlock checks the block against the CRC32C
// it recorded when it wrote it (falling back to SHA-256) and quarantines a
// damaged block; the receiver verifies the SHA-256 in any case.
func (s *Server) read(ctx context.Context, id blocks.ID) (data []byte, bp *[]byte, err error) {
	br, ok := s.store.(blocks.BlockReader)
	if !ok {
		data, err := s.store.Get(ctx, id)
		return data, nil, err
	}
	bp = getBuf(pooledMax)
	data, err = br.ReadBlock(ctx, id, (*bp)[:0])
	if err != nil {
		putBuf(bp)
		return nil, nil, err
	}
	if cap(data) != cap(*bp) {
		putBuf(bp) // a larger block: ReadBlock allocated its own buffer
		bp = nil
	}
	return data, bp, nil
}

// mangle applies the fault injection options to a block about to be sent.
// It never modifies data in place: a store may hand out shared memory.
func (s *Server) mangle(data []byte) []byte {
	if !s.opts.Corrupt && !s.opts.Truncate {
		return data
	}
	out := append([]byte(nil), data...)
	if s.opts.Truncate {
		out = out[:len(out)/2]
	}
	if s.opts.Corrupt && len(out) > 0 {
		for _, i := range []int{0, len(out) / 2, len(out) - 1} {
			out[i] ^= 0xff
		}
	}
	return out
}

// storeError turns a store failure into a status error and logs it.
func (s *Server) storeError(ctx context.Context, op string, id blocks.ID, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	s.log.Error("store failed", "op", op, "block", id.Short(), "err", err)
	return status.Errorf(codes.Internal, "%s %s: store failed", op, id.Short())
}
