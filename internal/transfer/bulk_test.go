package transfer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transport"
)

// bulkServer serves store on 127.0.0.1: through Server.Listener (gRPC and
// the bulk path on one port) when mux is set, else gRPC only. advertise
// forces the Have header even without the bulk path (a broken peer).
func bulkServer(t testing.TB, store blocks.Store, opts ServerOptions, mux, advertise bool) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, lis, store, opts, mux, advertise)
}

// serveOn is bulkServer on the listener lis.
func serveOn(t testing.TB, lis net.Listener, store blocks.Store, opts ServerOptions, mux, advertise bool) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := grpc.NewServer(GRPCServerOptions(testCreds.ServerTLS(), nil)...)
	srv := NewServer(store, opts)
	srv.Register(g)
	l := lis
	if mux {
		l = srv.Listener(lis, transport.TCP{}, testCreds.ServerTLS())
	}
	if advertise {
		srv.bulk.Store(true)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return srv, lis.Addr().String()
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fetchWith fetches a 3 MiB + 5 file of 256 KiB blocks served as the
// arguments say and returns the client's bulk state of the peer.
func fetchWith(t *testing.T, mux, advertise bool, opts FetchOptions) (*Server, *bulkPeer, *FetchStats) {
	t.Helper()
	src := blocks.NewMemStore()
	data := randomBytes(1, 3<<20+5)
	_, file, err := blocks.PutFile(t.Context(), src, bytes.NewReader(data), 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := bulkServer(t, src, ServerOptions{}, mux, advertise)
	pool := NewPool(nil, testCreds.ClientTLS())
	t.Cleanup(func() { pool.Close() })
	local := blocks.NewMemStore()
	opts.Logger = slog.New(slog.DiscardHandler)
	st, err := NewFetcher(local, pool, opts).Fetch(t.Context(), file, []string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	m, err := blocks.ReadManifest(t.Context(), local, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := blocks.WriteFile(t.Context(), local, m, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("fetched file differs (err %v)", err)
	}
	return srv, pool.bulkPeer(addr), st
}

// TestFetchBulkPath: a server behind Listener advertises the bulk path and
// every block goes over it; NoBulk, a gRPC-only server, and a server that
// advertises the path without serving it all still deliver the file over
// gRPC.
func TestFetchBulkPath(t *testing.T) {
	t.Run("bulk", func(t *testing.T) {
		srv, bp, st := fetchWith(t, true, false, FetchOptions{})
		if n := srv.bulkServed.Load(); n != int64(st.Fetched) || n == 0 {
			t.Errorf("%d blocks over the bulk path, %d fetched", n, st.Fetched)
		}
		if !bp.usable() {
			t.Error("bulk path not usable after the fetch")
		}
		bp.mu.Lock()
		idle := len(bp.idle)
		bp.mu.Unlock()
		if idle == 0 {
			t.Error("no connection kept for reuse")
		}
	})
	t.Run("no bulk", func(t *testing.T) {
		srv, _, st := fetchWith(t, true, false, FetchOptions{NoBulk: true})
		if n := srv.bulkServed.Load(); n != 0 {
			t.Errorf("%d blocks over the bulk path with NoBulk", n)
		}
		if served, _ := srv.Served(); served < int64(st.Fetched) {
			t.Errorf("served %d, fetched %d", served, st.Fetched)
		}
	})
	t.Run("grpc only server", func(t *testing.T) {
		srv, bp, _ := fetchWith(t, false, false, FetchOptions{})
		if n := srv.bulkServed.Load(); n != 0 || bp.usable() {
			t.Errorf("%d blocks over the bulk path, usable %v", n, bp.usable())
		}
	})
	t.Run("advertised but broken", func(t *testing.T) {
		// The bulk handshake reaches gRPC, which refuses it: the fetch
		// falls back to gRPC without penalising the peer.
		srv, bp, st := fetchWith(t, false, true, FetchOptions{})
		if n := srv.bulkServed.Load(); n != 0 || bp.usable() {
			t.Errorf("%d blocks over the bulk path, usable %v", n, bp.usable())
		}
		for _, ps := range st.Peers {
			if ps.Failures != 0 || ps.Banned {
				t.Errorf("peer penalised for the fallback: %+v", ps)
			}
		}
	})
}

// rawBulk opens a bulk connection to addr by hand.
func rawBulk(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, bulkMagic); err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, testCreds.ClientTLS())
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	var head [len(bulkMagic)]byte
	if _, err := io.ReadFull(tc, head[:]); err != nil || string(head[:]) != bulkMagic {
		t.Fatalf("handshake: %q, %v", head, err)
	}
	return tc
}

func bulkReq(ids ...blocks.ID) []byte {
	req := binary.BigEndian.AppendUint32(nil, uint32(len(ids)))
	for _, id := range ids {
		req = append(req, id[:]...)
	}
	return req
}

// TestBulkServerHostile: the server answers a well-formed request as the
// protocol says, closes the connection on a malformed one, and keeps
// serving gRPC and other bulk connections meanwhile.
func TestBulkServerHostile(t *testing.T) {
	src := blocks.NewMemStore()
	data := randomBytes(2, 5000)
	id := blocks.Sum(data)
	if err := src.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	_, addr := bulkServer(t, src, ServerOptions{}, true, false)

	// Held then missing, twice on one connection.
	c := rawBulk(t, addr)
	missing := blocks.Sum([]byte("missing"))
	for range 2 {
		if _, err := c.Write(bulkReq(id, missing)); err != nil {
			t.Fatal(err)
		}
		var hdr [bulkHeader]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hdr[:32], id[:]) || hdr[32] != bulkStatusOK || binary.BigEndian.Uint32(hdr[33:]) != uint32(len(data)) {
			t.Fatalf("header %x", hdr)
		}
		got := make([]byte, len(data))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("data differs (%v)", err)
		}
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hdr[:32], missing[:]) || hdr[32] != bulkStatusNotFound || binary.BigEndian.Uint32(hdr[33:]) != 0 {
			t.Fatalf("not-found header %x", hdr)
		}
	}

	for name, req := range map[string][]byte{
		"no ids":    binary.BigEndian.AppendUint32(nil, 0),
		"too many":  binary.BigEndian.AppendUint32(nil, MaxGetIDs+1),
		"huge":      binary.BigEndian.AppendUint32(nil, 1<<31),
		"truncated": append(binary.BigEndian.AppendUint32(nil, 2), id[:]...),
	} {
		t.Run(name, func(t *testing.T) {
			c := rawBulk(t, addr)
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			if name == "truncated" {
				c.(*tls.Conn).CloseWrite()
			}
			// The server closes the connection without an answer.
			if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
				t.Errorf("read %d bytes, %v; want a clean close", n, err)
			}
		})
	}

	// Garbage that is not the magic goes to gRPC, which drops it.
	g, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = g.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(g, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_, _ = io.Copy(io.Discard, g)
	g.Close()

	// Still serving both ways.
	pool := NewPool(nil, testCreds.ClientTLS())
	defer pool.Close()
	bp := pool.bulkPeer(addr)
	bp.on = true
	var got []byte
	if err := bp.get(t.Context(), []blocks.ID{id}, func(_ int, b *rxBlock) (bool, error) {
		got = append([]byte(nil), b.data...)
		return false, nil
	}); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("bulk get after hostile clients: %v", err)
	}
	rs, err := NewRemoteStore(pool, addr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Get(t.Context(), id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("gRPC get after hostile clients: %v", err)
	}
}

// fakeBulk is a bulk server that answers the first request of every
// connection with answer(ids), then closes it.
func fakeBulk(t *testing.T, answer func(ids []blocks.ID) []byte) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var head [len(bulkMagic)]byte
				if _, err := io.ReadFull(c, head[:]); err != nil {
					return
				}
				c := tls.Server(c, testCreds.ServerTLS())
				if c.Handshake() != nil {
					return
				}
				_, _ = io.WriteString(c, bulkMagic)
				var n [4]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				raw := make([]byte, binary.BigEndian.Uint32(n[:])*blocks.IDSize)
				if _, err := io.ReadFull(c, raw); err != nil {
					return
				}
				var ids []blocks.ID
				for i := 0; i < len(raw); i += blocks.IDSize {
					ids = append(ids, blocks.ID(raw[i:i+blocks.IDSize]))
				}
				_, _ = c.Write(answer(ids))
			}()
		}
	}()
	return lis.Addr().String()
}

func bulkAnswer(id blocks.ID, st byte, size uint32, data []byte) []byte {
	b := append([]byte(nil), id[:]...)
	b = append(b, st)
	b = binary.BigEndian.AppendUint32(b, size)
	return append(b, data...)
}

// TestBulkClientHostile: the client checks every answer's envelope as
// getStream does; each breach is an error that bans the peer (ErrProtocol,
// ErrTooLarge), and the data is never handed on unchecked.
func TestBulkClientHostile(t *testing.T) {
	data := randomBytes(3, 4096)
	id := blocks.Sum(data)
	other := blocks.Sum([]byte("other"))
	for _, tc := range []struct {
		name   string
		answer func(ids []blocks.ID) []byte
		want   error
	}{
		{"wrong id", func(ids []blocks.ID) []byte { return bulkAnswer(other, 0, 5, []byte("hello")) }, ErrProtocol},
		{"too large", func(ids []blocks.ID) []byte { return bulkAnswer(ids[0], 0, blocks.MaxBlockSize+1, nil) }, blocks.ErrTooLarge},
		{"not found with data", func(ids []blocks.ID) []byte { return bulkAnswer(ids[0], 1, 3, []byte("abc")) }, ErrProtocol},
		{"unknown status", func(ids []blocks.ID) []byte { return bulkAnswer(ids[0], 7, 0, nil) }, ErrProtocol},
		{"short stream", func(ids []blocks.ID) []byte { return bulkAnswer(ids[0], 0, uint32(len(data)), data)[:100] }, ErrProtocol},
		{"missing answer", func(ids []blocks.ID) []byte { return bulkAnswer(ids[0], 0, uint32(len(data)), data) }, ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeBulk(t, tc.answer) // "missing answer": one answer for two ids
			bp := &bulkPeer{target: addr, addr: addr, via: transport.TCP{}, on: true, tls: testCreds.ClientTLS()}
			defer bp.close()
			ids := []blocks.ID{id}
			if tc.name == "missing answer" {
				ids = []blocks.ID{id, other}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := bp.get(ctx, ids, func(i int, b *rxBlock) (bool, error) {
				if b != nil && !bytes.Equal(b.data, data) {
					t.Errorf("handed on %d bytes that are not the block", len(b.data))
				}
				return false, nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// TestBulkReconnects: a connection kept for reuse that the server closed
// meanwhile costs nothing: the request is sent again on a new one.
func TestBulkReconnects(t *testing.T) {
	src := blocks.NewMemStore()
	data := randomBytes(4, 70000)
	id := blocks.Sum(data)
	if err := src.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	_, addr := bulkServer(t, src, ServerOptions{}, true, false)
	bp := &bulkPeer{target: addr, addr: addr, via: transport.TCP{}, on: true, tls: testCreds.ClientTLS()}
	defer bp.close()
	get := func() error {
		return bp.get(t.Context(), []blocks.ID{id}, func(_ int, b *rxBlock) (bool, error) {
			if !bytes.Equal(b.data, data) {
				return false, errors.New("differs")
			}
			if addr4k(&b.data) != 0 {
				return false, errors.New("data not 4 KiB aligned")
			}
			return false, nil
		})
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	// Break the idle connection under the client's feet.
	bp.mu.Lock()
	if len(bp.idle) != 1 {
		t.Fatalf("%d idle connections", len(bp.idle))
	}
	raw := bp.idle[0].c.(*tls.Conn).NetConn().(*net.TCPConn)
	raw.CloseRead()
	raw.CloseWrite()
	bp.mu.Unlock()
	if err := get(); err != nil {
		t.Fatalf("after the server side closed: %v", err)
	}
}

// TestBulkClosedBeforeAnswer: a peer that closes the connection before it
// answers at all (a node shutting down closes its bulk connections) has
// lost the connection, not lied: the error is no ErrProtocol, so the fetch
// counts a failure and does not ban the peer.
func TestBulkClosedBeforeAnswer(t *testing.T) {
	addr := fakeBulk(t, func([]blocks.ID) []byte { return nil })
	bp := &bulkPeer{target: addr, addr: addr, via: transport.TCP{}, on: true, tls: testCreds.ClientTLS()}
	defer bp.close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := bp.get(ctx, []blocks.ID{blocks.Sum([]byte("x"))}, func(int, *rxBlock) (bool, error) { return false, nil })
	if err == nil || errors.Is(err, ErrProtocol) {
		t.Fatalf("err %v, want a lost connection, not ErrProtocol", err)
	}
}
