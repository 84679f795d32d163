// Package transferbench holds the block transfer benchmarks: in-process Go
// benchmarks of the wire path (this file; opt-in, see skipUnlessAsked) and
// run.sh, which measures real p2pc processes against rsync on loopback and
// across bandwidth-capped network namespaces.
package transferbench

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer"
)

// BenchmarkFetchLoopback fetches a 256 MiB file between in-memory stores
// over gRPC on 127.0.0.1 from 1 and 3 sources: the cost of the protocol,
// the verification and the scheduling, without any disk.
func BenchmarkFetchLoopback(b *testing.B) {
	skipUnlessAsked(b)
	const size = 256 << 20
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data)
	for _, sources := range []int{1, 3} {
		b.Run(fmt.Sprintf("sources=%d", sources), func(b *testing.B) {
			var addrs []string
			var file blocks.ID
			for range sources {
				s := blocks.NewMemStore()
				var err error
				if _, file, err = blocks.PutFile(b.Context(), s, bytes.NewReader(data), 0); err != nil {
					b.Fatal(err)
				}
				addrs = append(addrs, serve(b, s))
			}
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				pool := transfer.NewPool(nil, benchCreds.ClientTLS())
				f := transfer.NewFetcher(blocks.NewMemStore(), pool, transfer.FetchOptions{Logger: slog.New(slog.DiscardHandler)})
				if _, err := f.Fetch(b.Context(), file, addrs, nil); err != nil {
					b.Fatal(err)
				}
				_ = pool.Close()
			}
		})
	}
}

// BenchmarkFetchDisk is BenchmarkFetchLoopback with disk stores on both
// sides (in the benchmark's temporary directory), one source, and the
// file written out with FetchFile: the path of `p2pc blocks get -o`.
func BenchmarkFetchDisk(b *testing.B) {
	skipUnlessAsked(b)
	const size = 256 << 20
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(data)
	src, err := blocks.OpenDisk(b.TempDir(), blocks.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	_, file, err := blocks.PutFile(b.Context(), src, bytes.NewReader(data), 0)
	if err != nil {
		b.Fatal(err)
	}
	addr := serve(b, src)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		dst, err := blocks.OpenDisk(filepath.Join(dir, "store"), blocks.DiskOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pool := transfer.NewPool(nil, benchCreds.ClientTLS())
		f := transfer.NewFetcher(dst, pool, transfer.FetchOptions{Logger: slog.New(slog.DiscardHandler)})
		b.StartTimer()
		if _, err := f.FetchFile(b.Context(), file, []string{addr}, nil, filepath.Join(dir, "out")); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = pool.Close()
		_ = dst.Close()
		b.StartTimer()
	}
}

// skipUnlessAsked skips the benchmark unless P2PC_BENCH_TRANSFER is set:
// each iteration moves 256 MiB, far too much for a fixed -benchtime of
// thousands of iterations such as `just bench` uses. Run them with
//
//	P2PC_BENCH_TRANSFER=1 go test -run '^$' -bench . -benchtime 3x ./benchmarks/transfer/
func skipUnlessAsked(b *testing.B) {
	if os.Getenv("P2PC_BENCH_TRANSFER") == "" {
		b.Skip("set P2PC_BENCH_TRANSFER=1 to run (each iteration moves 256 MiB)")
	}
}

func serve(b *testing.B, s blocks.Store) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(transfer.GRPCServerOptions(benchCreds.ServerTLS(), nil)...)
	transfer.NewServer(s, transfer.ServerOptions{Logger: slog.New(slog.DiscardHandler)}).Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	b.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}
