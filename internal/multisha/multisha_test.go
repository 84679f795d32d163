package multisha

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
)

func messages(seed uint64, k, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	out := make([][]byte, k)
	for i := range out {
		out[i] = make([]byte, n)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

func checkEqual(t *testing.T, msgs [][]byte) {
	t.Helper()
	out := make([][Size]byte, len(msgs))
	SumEqual(out, msgs)
	for i, m := range msgs {
		if want := sha256.Sum256(m); out[i] != want {
			t.Fatalf("SumEqual: message %d of %d (%d bytes): %x, want %x", i, len(msgs), len(m), out[i], want)
		}
	}
}

// The kernel directly, for every lane count: SumEqual would hash fewer
// than minLanes messages with crypto/sha256.
func TestSum16Lanes(t *testing.T) {
	if !Accelerated() {
		t.Skip("no AVX-512 here")
	}
	for _, n := range []int{0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, 64<<10 + 7} {
		for k := 1; k <= Lanes; k++ {
			msgs := messages(1, k, n)
			out := make([][Size]byte, k)
			sum16(out, msgs)
			for i, m := range msgs {
				if out[i] != sha256.Sum256(m) {
					t.Fatalf("sum16: %d lanes of %d bytes: lane %d wrong", k, n, i)
				}
			}
		}
	}
}

func TestSumEqual(t *testing.T) {
	for _, k := range []int{0, 1, 7, 8, 16, 17, 40} {
		checkEqual(t, messages(2, k, 3000))
	}
	checkEqual(t, messages(3, 20, 1<<20))
	// Every length over two blocks: padding in one step or two.
	for n := 0; n <= 200; n++ {
		checkEqual(t, messages(4, Lanes, n))
	}
}

func TestSumEqualUnequalPanics(t *testing.T) {
	if !Accelerated() {
		t.Skip("no AVX-512 here")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for messages of unequal length")
		}
	}()
	msgs := messages(5, Lanes, 100)
	msgs[3] = msgs[3][:99]
	SumEqual(make([][Size]byte, Lanes), msgs)
}

func FuzzSumEqual(f *testing.F) {
	f.Add([]byte("abc"), uint8(16))
	f.Add(make([]byte, 300), uint8(9))
	f.Fuzz(func(t *testing.T, p []byte, k uint8) {
		msgs := make([][]byte, int(k)%(2*Lanes+1))
		for i := range msgs {
			m := append([]byte(nil), p...)
			if len(m) > 0 {
				m[i%len(m)] ^= byte(i)
			}
			msgs[i] = m
		}
		checkEqual(t, msgs)
	})
}

func BenchmarkSumEqual(b *testing.B) {
	msgs := messages(6, Lanes, 1<<20)
	out := make([][Size]byte, Lanes)
	b.SetBytes(Lanes << 20)
	for b.Loop() {
		SumEqual(out, msgs)
	}
}

func BenchmarkSHA256(b *testing.B) {
	msgs := messages(6, Lanes, 1<<20)
	b.SetBytes(Lanes << 20)
	for b.Loop() {
		for _, m := range msgs {
			sha256.Sum256(m)
		}
	}
}

// BenchmarkLanes: the kernel's time for k lanes of 1 MiB, to compare with
// k times crypto/sha256's (minLanes).
func BenchmarkLanes(b *testing.B) {
	if !Accelerated() {
		b.Skip("no AVX-512 here")
	}
	msgs := messages(6, Lanes, 1<<20)
	for _, k := range []int{1, 8, 16} {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			out := make([][Size]byte, k)
			b.SetBytes(int64(k) << 20)
			for b.Loop() {
				sum16(out, msgs[:k])
			}
		})
	}
}
