package transfer

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
	"github.com/p2pc/p2pc/internal/transport"
)

// The bulk path (p2pc.bulk.v1): block bytes on a mutual TLS connection of
// their own beside gRPC, on the same port, where the transport has the
// transport.Bulk capability (tcp). See docs/design/transfer.md.
const (
	// bulkMagic opens a bulk connection, both ways. It cannot be mistaken
	// for the HTTP/2 client preface ("PRI * HTTP/2.0...").
	bulkMagic = "P2PCBLK1"
	// bulkHeader is the size of an answer's header: ID, status, length.
	bulkHeader = blocks.IDSize + 1 + 4
	// bulkStatusOK and bulkStatusNotFound are the answer statuses.
	bulkStatusOK       = 0
	bulkStatusNotFound = 1
	// bulkMetaKey is the response header with which a server's Have
	// answers advertise the bulk path on the connection's port.
	bulkMetaKey = "p2pc-bulk"

	bulkIdleTimeout  = 2 * time.Minute // a server closes a connection idle this long
	bulkReuseIdle    = time.Minute     // a client reuses a connection idle at most this long
	bulkWriteTimeout = time.Minute     // a server gives up on a client that reads nothing this long
	bulkMaxIdle      = 16              // idle connections a client keeps per peer
	bulkRetryAfter   = time.Minute     // after a bulk connection failed to open, a client uses gRPC this long
)

// ---------------------------------------------------------------- server

// Listener returns a listener for the grpc.Server that s is registered on:
// it accepts on l (a listener of t), caps the connections whose handshake
// is not done (gate.go) and hands the gRPC connections on. When t has the
// transport.Bulk capability it also serves the connections that open
// with the bulk path's magic itself, and s advertises the bulk path in
// its Have answers; otherwise (or without this listener) s serves gRPC
// only. Closing the returned listener (grpc.Server.Stop does) closes l
// and every bulk connection.
func (s *Server) Listener(l net.Listener, t transport.Transport, serverTLS *tls.Config) net.Listener {
	if serverTLS == nil {
		panic("transfer: bulk listener without TLS")
	}
	_, bulk := t.(transport.Bulk)
	ctx, cancel := context.WithCancel(context.Background())
	m := &muxListener{
		Listener: l,
		bulkOn:   bulk,
		tls:      serverTLS,
		s:        s,
		ctx:      ctx,
		cancel:   cancel,
		conns:    make(chan net.Conn),
		done:     make(chan struct{}),
		bulk:     make(map[net.Conn]struct{}),
		gate:     newGate(s.log, MaxHandshakingPerIP, MaxHandshaking),
	}
	if bulk {
		s.bulk.Store(true)
	}
	go m.acceptLoop()
	return m
}

type muxListener struct {
	net.Listener
	bulkOn bool // the transport has the bulk capability: sniff
	tls    *tls.Config
	s      *Server
	ctx    context.Context // ends when the listener is closed
	cancel context.CancelFunc
	conns  chan net.Conn // gRPC connections, sniffed
	done   chan struct{} // closed by Close or when l fails
	gate   *gate         // caps connections whose handshake is not done

	// mu is taken before the gate's (a bulk connection's Close).
	mu     sync.Mutex
	err    error // l's Accept error, once it failed
	closed bool
	bulk   map[net.Conn]struct{}
	once   sync.Once
}

// acceptLoop accepts until l fails for good. A temporary failure (out of
// file descriptors, say) is retried with a backoff up to a second, and
// logged: a node must not go deaf because it once ran out of fds.
func (m *muxListener) acceptLoop() {
	var backoff time.Duration
	failures := 0
	for {
		c, err := m.Listener.Accept()
		if err != nil {
			if temporaryAccept(err) {
				if failures == 0 {
					m.s.log.Warn("accept failed; retrying", "err", err)
				}
				failures++
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-m.done:
					return
				}
				continue
			}
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			m.shut()
			return
		}
		if failures > 0 {
			m.s.log.Warn("accepting connections again", "failed accepts", failures)
		}
		backoff, failures = 0, 0
		if !m.bulkOn {
			go m.pass(m.gate.admit(c))
			continue
		}
		go m.sniff(m.gate.admit(c))
	}
}

// temporaryAccept reports whether an Accept error passes: a timeout, a
// connection aborted before it was accepted, or running out of file
// descriptors, buffers or memory (the process or the system).
func temporaryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sniff reads a new connection's first bytes: the bulk magic makes it a
// bulk connection, anything else goes to gRPC with those bytes put back.
// The first byte must come within FirstBytesTimeout, the rest, the TLS
// handshake included, by the connection's handshake deadline
// (HandshakeTimeout after it was accepted).
func (m *muxListener) sniff(c *gatedConn) {
	head := make([]byte, len(bulkMagic))
	_ = c.SetReadDeadline(c.firstBytes)
	n, err := c.Read(head)
	if err == nil && n < len(head) {
		_ = c.SetReadDeadline(c.deadline)
		var k int
		k, err = io.ReadFull(c, head[n:])
		n += k
	}
	_ = c.SetReadDeadline(time.Time{})
	if err == nil && string(head) == bulkMagic {
		if !m.track(c) {
			c.Close()
			return
		}
		defer m.untrack(c)
		// The rest of the connection is TLS: mutual, as gRPC's.
		bc := &batchConn{Conn: c, off: m.s.unbatched.Load()}
		tc := tls.Server(bc, m.tls)
		hctx, cancel := context.WithDeadline(m.ctx, c.deadline)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			m.s.refused(c.RemoteAddr(), err)
			return
		}
		c.handshakeDone()
		m.s.serveBulk(m.ctx, tc, bc)
		return
	}
	if n == 0 && err != nil {
		c.Close()
		return
	}
	// Let gRPC deal with whatever this is, short or not.
	m.pass(&prefixConn{Conn: c, head: head[:n]})
}

// pass hands c to gRPC's Accept.
func (m *muxListener) pass(c net.Conn) {
	select {
	case m.conns <- c:
	case <-m.done:
		c.Close()
	}
}

func (m *muxListener) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.bulk[c] = struct{}{}
	return true
}

func (m *muxListener) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.bulk, c)
	m.mu.Unlock()
	c.Close()
}

// Accept returns the next gRPC connection.
func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		m.mu.Lock()
		err := m.err
		m.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return nil, err
	}
}

// Close closes the listener and every bulk connection.
func (m *muxListener) Close() error {
	err := m.Listener.Close()
	m.shut()
	return err
}

func (m *muxListener) shut() {
	m.once.Do(func() {
		m.mu.Lock()
		m.closed = true
		for c := range m.bulk {
			c.Close()
		}
		m.mu.Unlock()
		m.cancel()
		close(m.done)
		m.Listener.Close()
	})
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	head []byte
}

func (c *prefixConn) handshakeDone() {
	if h, ok := c.Conn.(handshaking); ok {
		h.handshakeDone()
	}
}

func (c *prefixConn) handshakeDeadline() time.Time {
	if h, ok := c.Conn.(handshaking); ok {
		return h.handshakeDeadline()
	}
	return time.Now().Add(HandshakeTimeout)
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// serveBulk answers the requests of one bulk connection until it closes,
// fails, breaks the protocol or idles for bulkIdleTimeout. Each answer is
// written from the buffer the block was read into, its TLS records
// gathered by batch (under c) and written batchSize bytes at a time; each
// answer is flushed whole before sendBulk returns.
func (s *Server) serveBulk(ctx context.Context, c net.Conn, batch *batchConn) {
	_ = c.SetWriteDeadline(time.Now().Add(bulkWriteTimeout))
	if _, err := io.WriteString(c, bulkMagic); err != nil {
		return
	}
	var req [4 + MaxGetIDs*blocks.IDSize]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(bulkIdleTimeout))
		if _, err := io.ReadFull(c, req[:4]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(req[:4])
		if n == 0 || n > MaxGetIDs {
			s.log.Debug("bulk request refused", "ids", n, "peer", c.RemoteAddr().String())
			return
		}
		raw := req[4 : 4+n*blocks.IDSize]
		if _, err := io.ReadFull(c, raw); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		for i := range int(n) {
			var id blocks.ID
			copy(id[:], raw[i*blocks.IDSize:])
			if !s.sendBulk(ctx, c, batch, id) {
				return
			}
		}
	}
}

// sendBulk answers one ID of a bulk request. It reports false when the
// connection is to be closed: a write failed, the store failed, or the
// server is stalling (fault injection).
func (s *Server) sendBulk(ctx context.Context, c net.Conn, batch *batchConn, id blocks.ID) bool {
	if s.stall(id) {
		// Hang until the client gives up and closes the connection.
		_ = c.SetReadDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = io.Copy(io.Discard, c)
		stop()
		return false
	}
	data, bp, st, err := s.block(ctx, id)
	if err != nil {
		s.log.Debug("bulk answer failed", "block", id.Short(), "err", err)
		return false
	}
	var hdr [bulkHeader]byte
	copy(hdr[:], id[:])
	hdr[blocks.IDSize] = st
	binary.BigEndian.PutUint32(hdr[blocks.IDSize+1:], uint32(len(data)))
	bufs := net.Buffers{hdr[:], data}
	_ = c.SetWriteDeadline(time.Now().Add(bulkWriteTimeout))
	batch.begin()
	_, err = bufs.WriteTo(c)
	if ferr := batch.flush(); err == nil {
		err = ferr
	}
	putBuf(bp)
	if err != nil {
		return false
	}
	s.served.Add(1)
	s.servedBytes.Add(int64(len(data)))
	s.bulkServed.Add(1)
	return true
}

// advertiseBulk tells the client of a Have call that the bulk path is
// open on this port.
func (s *Server) advertiseBulk(ctx context.Context) {
	if s.bulk.Load() {
		_ = grpc.SetHeader(ctx, metadata.Pairs(bulkMetaKey, "1"))
	}
}

// ---------------------------------------------------------------- client

// bulkPeer is the client side of the bulk path to one peer: whether the
// peer advertised it, and the idle connections kept for reuse.
type bulkPeer struct {
	target string         // canonical, the Pool's key
	addr   string         // target without its scheme, for via
	via    transport.Bulk // target's transport
	tls    *tls.Config

	// mu is a leaf, taken after Pool's.
	mu       sync.Mutex
	on       bool      // advertised in the last Have answer
	offUntil time.Time // a connection failed to open: gRPC only until then
	idle     []idleConn
	closed   bool
}

type idleConn struct {
	c     net.Conn
	since time.Time
}

// usable reports whether Gets to the peer should take the bulk path.
func (b *bulkPeer) usable() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.on && !b.closed && time.Now().After(b.offUntil)
}

// advertised records what a Have answer's header said.
func (b *bulkPeer) advertised(md metadata.MD) {
	if b == nil {
		return
	}
	on := len(md.Get(bulkMetaKey)) > 0 && md.Get(bulkMetaKey)[0] == "1"
	b.mu.Lock()
	b.on = on
	b.mu.Unlock()
}

// take returns an idle connection, or nil.
func (b *bulkPeer) take() net.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.idle) > 0 {
		ic := b.idle[len(b.idle)-1]
		b.idle = b.idle[:len(b.idle)-1]
		if time.Since(ic.since) < bulkReuseIdle {
			return ic.c
		}
		ic.c.Close()
	}
	return nil
}

// give puts a connection whose last request was answered in full back.
func (b *bulkPeer) give(c net.Conn) {
	_ = c.SetDeadline(time.Time{})
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.idle) >= bulkMaxIdle {
		c.Close()
		return
	}
	b.idle = append(b.idle, idleConn{c, time.Now()})
}

// close closes the idle connections; the peer is not used again.
func (b *bulkPeer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, ic := range b.idle {
		ic.c.Close()
	}
	b.idle = nil
}

// dial opens a bulk connection and checks the server's answer to the
// magic.
func (b *bulkPeer) dial(ctx context.Context) (net.Conn, error) {
	raw, err := b.via.DialBulk(ctx, b.addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	// The magic in the clear picks the bulk path; then mutual TLS, and
	// the server's magic inside it.
	var c net.Conn = raw
	var head [len(bulkMagic)]byte
	if _, err = io.WriteString(raw, bulkMagic); err == nil {
		tc := tls.Client(raw, b.tls)
		c = tc
		if err = tc.HandshakeContext(ctx); err == nil {
			_, err = io.ReadFull(c, head[:])
		}
	}
	if err == nil && string(head[:]) != bulkMagic {
		err = fmt.Errorf("%w: bulk handshake answered %q", ErrProtocol, head[:])
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// errBulkUnavailable: the bulk connection could not be opened; the caller
// falls back to gRPC.
var errBulkUnavailable = errors.New("bulk path unavailable")

// get is getStream over the bulk path: the same checks, the same calls
// of fn. It fails with errBulkUnavailable, having called fn for nothing,
// when it cannot open a connection; the peer is then taken as gRPC only
// for bulkRetryAfter.
func (b *bulkPeer) get(ctx context.Context, ids []blocks.ID, fn func(i int, b *rxBlock) (keep bool, err error)) error {
	if len(ids) == 0 || len(ids) > MaxGetIDs {
		return fmt.Errorf("get: %d ids", len(ids))
	}
	req := make([]byte, 4, 4+len(ids)*blocks.IDSize)
	binary.BigEndian.PutUint32(req, uint32(len(ids)))
	for _, id := range ids {
		req = append(req, id[:]...)
	}
	// A reused connection may have been closed by the server meanwhile:
	// if it fails before the first answer arrives, retry on a new one.
	for attempt := 0; ; attempt++ {
		c := b.take()
		fresh := c == nil
		if fresh {
			var err error
			if c, err = b.dial(ctx); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("get: %w", err)
				}
				b.mu.Lock()
				b.offUntil = time.Now().Add(bulkRetryAfter)
				b.mu.Unlock()
				return fmt.Errorf("%w: %v", errBulkUnavailable, err)
			}
		}
		started, err := bulkRequest(ctx, c, req, ids, fn)
		if err == nil {
			b.give(c)
			return nil
		}
		c.Close()
		if started || fresh || attempt > 0 || ctx.Err() != nil {
			return err
		}
	}
}

// bulkRequest sends one request on c and reads its answers. started
// reports whether any byte of an answer had arrived when it failed.
func bulkRequest(ctx context.Context, c net.Conn, req []byte, ids []blocks.ID, fn func(i int, b *rxBlock) (keep bool, err error)) (started bool, err error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Time{})
	}
	// A cancelled context unblocks the reads.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() && err == nil {
			err = fmt.Errorf("get: %w", ctx.Err())
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("get: %w (%v)", ctx.Err(), err)
		}
	}()
	if _, err := c.Write(req); err != nil {
		return false, fmt.Errorf("get: %w", err)
	}
	var hdr [bulkHeader]byte
	for i := range ids {
		n, err := io.ReadFull(c, hdr[:])
		if n > 0 {
			started = true
		}
		if (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && !started {
			// Closed before any answer: the peer went away (a node that
			// shuts down closes its bulk connections), which says
			// nothing false about a block.
			return false, fmt.Errorf("get: connection closed before an answer: %w", err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return started, fmt.Errorf("get: %w: stream ended after %d of %d blocks", ErrProtocol, i, len(ids))
		}
		if err != nil {
			return started, fmt.Errorf("get: %w", err)
		}
		st := hdr[blocks.IDSize]
		size := binary.BigEndian.Uint32(hdr[blocks.IDSize+1:])
		var status transferpb.Block_Status
		switch st {
		case bulkStatusOK:
			status = transferpb.Block_OK
		case bulkStatusNotFound:
			status = transferpb.Block_NOT_FOUND
		default:
			return true, fmt.Errorf("get: %w: unknown status %d", ErrProtocol, st)
		}
		if size > blocks.MaxBlockSize {
			return true, fmt.Errorf("get: block %x: %d bytes: %w", hdr[:4], size, blocks.ErrTooLarge)
		}
		// The envelope is checked before the data is read: size is
		// bounded, and not-found answers carry none (checkBlock).
		if err := checkBlock(hdr[:blocks.IDSize], status, make([]byte, min(size, 1)), ids[i]); err != nil {
			return true, fmt.Errorf("get: %w", err)
		}
		var rb *rxBlock
		if status == transferpb.Block_OK {
			rb = &rxBlock{status: status, hasData: true}
			rb.buf, rb.data = alignedBuf(int(size))
			if _, err := io.ReadFull(c, rb.data); err != nil {
				rb.release()
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					err = fmt.Errorf("%w: stream ended inside block %d of %d", ErrProtocol, i, len(ids))
				}
				return true, fmt.Errorf("get: %w", err)
			}
			id := ids[i]
			rb.id = id[:]
		}
		keep, err := fn(i, rb)
		if rb != nil && !keep {
			rb.release()
		}
		if err != nil {
			// The rest of the answers is not read: the connection is not
			// reusable.
			return true, err
		}
	}
	return true, nil
}

// alignedBuf returns a pooled buffer and a slice of n bytes of it that
// starts on a 4 KiB boundary where the buffer has room for that (as
// blockCodec places the data it decodes).
func alignedBuf(n int) (*[]byte, []byte) {
	bp := getBuf(n)
	pad := 0
	if n >= 4096 {
		if p := alignPad(addr4k(bp)); p+n <= cap(*bp) {
			pad = p
		}
	}
	*bp = (*bp)[:pad+n]
	return bp, (*bp)[pad:]
}

// haveHeader is Have that also returns the header metadata of the last
// answer (where a server advertises the bulk path).
func haveHeader(ctx context.Context, c transferpb.BlocksClient, ids []blocks.ID) ([]bool, metadata.MD, error) {
	var md metadata.MD
	has, err := have(ctx, c, ids, grpc.Header(&md))
	return has, md, err
}
