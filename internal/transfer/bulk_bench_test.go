package transfer

import (
	"bytes"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transport"
)

// BenchmarkBulkPath is the guard of the bulk path (`just bench-guard`): a
// 32 MiB file of 256 KiB blocks fetched from one in-memory source through
// the server's listener, with path=bulk (block data on the bulk path) and
// path=grpc (FetchOptions.NoBulk: block data on gRPC streams). link=lo is
// loopback as it is; link=1gbit caps what the server sends at 119 MiB/s,
// shared by its connections (a gigabit LAN, emulated in the process;
// benchmarks/transfer/bulkcpu.sh measures real processes over a veth
// pair capped with tc). One
// op = one fetch; cpu-ns/MiB is the process's CPU time (client and server
// together) per MiB.
func BenchmarkBulkPath(b *testing.B) {
	const size = 32 << 20
	data := randomBytes(7, size)
	src := blocks.NewMemStore()
	_, file, err := blocks.PutFile(b.Context(), src, bytes.NewReader(data), 256<<10)
	if err != nil {
		b.Fatal(err)
	}
	for _, link := range []struct {
		name string
		rate int64 // bytes per second the server may send; 0: no cap
	}{{"lo", 0}, {"1gbit", 119 << 20}} {
		for _, path := range []string{"bulk", "grpc"} {
			b.Run("link="+link.name+"/path="+path, func(b *testing.B) {
				srv, addr := shapedServer(b, src, link.rate)
				b.SetBytes(size)
				cpu0 := cpuTime()
				for b.Loop() {
					pool := NewPool(nil, testCreds.ClientTLS())
					f := NewFetcher(blocks.NewMemStore(), pool, FetchOptions{NoBulk: path == "grpc", Logger: slog.New(slog.DiscardHandler)})
					if _, err := f.Fetch(b.Context(), file, []string{addr}, nil); err != nil {
						b.Fatal(err)
					}
					pool.Close()
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/float64(size>>20), "cpu-ns/MiB")
				if bulk := srv.bulkServed.Load(); (path == "bulk") != (bulk > 0) {
					b.Fatalf("path=%s: %d blocks over the bulk path", path, bulk)
				}
			})
		}
	}
}

// shapedServer is bulkServer (gRPC and the bulk path on one port) whose
// connections together send at most rate bytes per second (0: no cap).
func shapedServer(b *testing.B, store blocks.Store, rate int64) (*Server, string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var l net.Listener = lis
	if rate > 0 {
		l = &shapedListener{Listener: lis, link: &shapedLink{rate: rate}}
	}
	g := grpc.NewServer(GRPCServerOptions(testCreds.ServerTLS(), nil)...)
	srv := NewServer(store, ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(srv.Listener(l, transport.TCP{}, testCreds.ServerTLS()))
	}()
	b.Cleanup(func() {
		g.Stop()
		<-done
	})
	return srv, lis.Addr().String()
}

// shapedLink is a shared send budget: a write waits while the link is
// more than linkBurst behind, as a NIC's queue fills, so that many small
// writes do not each pay a sleep.
type shapedLink struct {
	rate int64
	mu   sync.Mutex
	next time.Time // when the link has sent everything queued
}

const linkBurst = 2 * time.Millisecond

func (k *shapedLink) send(n int) {
	k.mu.Lock()
	now := time.Now()
	if k.next.Before(now) {
		k.next = now
	}
	k.next = k.next.Add(time.Duration(int64(n) * int64(time.Second) / k.rate))
	wait := k.next.Sub(now) - linkBurst
	k.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait) // the emulated transmission time
	}
}

type shapedListener struct {
	net.Listener
	link *shapedLink
}

func (l *shapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &shapedConn{Conn: c, link: l.link}, nil
}

type shapedConn struct {
	net.Conn
	link *shapedLink
}

func (c *shapedConn) Write(p []byte) (int, error) {
	c.link.send(len(p))
	return c.Conn.Write(p)
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkBulkBatch is the guard of the bulk answers' write batching
// (batch.go; `just bench-guard`): a 64 MiB file of 1 MiB blocks (what
// `blocks put` makes) fetched over the bulk path on 127.0.0.1, with the
// server's TLS records gathered into writes of about 256 KiB (batch=on)
// or written one record per write (batch=off). cpu-ns/MiB is the
// process's CPU time, client and server together, per MiB.
func BenchmarkBulkBatch(b *testing.B) {
	const size = 64 << 20
	src := blocks.NewMemStore()
	_, file, err := blocks.PutFile(b.Context(), src, bytes.NewReader(randomBytes(8, size)), 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []string{"on", "off"} {
		b.Run("batch="+batch, func(b *testing.B) {
			srv, addr := shapedServer(b, src, 0)
			srv.unbatched.Store(batch == "off")
			b.SetBytes(size)
			cpu0 := cpuTime()
			for b.Loop() {
				pool := NewPool(nil, testCreds.ClientTLS())
				f := NewFetcher(blocks.NewMemStore(), pool, FetchOptions{Logger: slog.New(slog.DiscardHandler)})
				if _, err := f.Fetch(b.Context(), file, []string{addr}, nil); err != nil {
					b.Fatal(err)
				}
				pool.Close()
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/float64(size>>20), "cpu-ns/MiB")
			if srv.bulkServed.Load() == 0 {
				b.Fatal("no block over the bulk path")
			}
		})
	}
}
