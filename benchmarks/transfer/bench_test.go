// Package transferbench holds the block transfer benchmarks: an in-process
// Go benchmark of the wire path (this file) and run.sh, which measures
// real p2pc processes against rsync and across bandwidth-capped network
// namespaces.
package transferbench

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer"
)

// BenchmarkFetchLoopback fetches a 256 MiB file between in-memory stores
// over gRPC on 127.0.0.1 from 1 and 3 sources: the cost of the protocol,
// the verification and the scheduling, without any disk.
func BenchmarkFetchLoopback(b *testing.B) {
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
				pool := transfer.NewPool()
				f := transfer.NewFetcher(blocks.NewMemStore(), pool, transfer.FetchOptions{Logger: slog.New(slog.DiscardHandler)})
				if _, err := f.Fetch(b.Context(), file, addrs, nil); err != nil {
					b.Fatal(err)
				}
				_ = pool.Close()
			}
		})
	}
}

func serve(b *testing.B, s blocks.Store) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(transfer.GRPCServerOptions()...)
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
