package multisha

import (
	"crypto/sha256"
	"encoding/binary"
)

// Size is the length of a digest in bytes.
const Size = sha256.Size

// Lanes is how many messages the kernel hashes at once.
const Lanes = 16

// minLanes is the fewest messages worth a kernel run: it costs the same
// for any number of lanes, about as much as crypto/sha256 takes for 7 to 8
// messages of the same length (BenchmarkLanes).
const minLanes = 8

// maxSteps bounds the 64-byte steps of one block16 call: 1024 steps (64
// KiB of each message) take about 0.35 ms.
const maxSteps = 1024

// Accelerated reports whether messages are hashed many at a time here.
func Accelerated() bool { return accelerated }

var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// SumEqual sets out[i] to the SHA-256 digest of msgs[i]. The messages
// must all have the same length (it panics otherwise), and out must be as
// long as msgs.
func SumEqual(out [][Size]byte, msgs [][]byte) {
	if len(out) != len(msgs) {
		panic("multisha: SumEqual: len(out) != len(msgs)")
	}
	for len(msgs) > 0 {
		k := min(len(msgs), Lanes)
		if !accelerated || k < minLanes {
			for i := range k {
				out[i] = sha256.Sum256(msgs[i])
			}
		} else {
			sum16(out[:k], msgs[:k])
		}
		out, msgs = out[k:], msgs[k:]
	}
}

// sum16 hashes 1 to Lanes messages of equal length with block16, the
// unused lanes repeating the first message.
func sum16(out [][Size]byte, msgs [][]byte) {
	n := len(msgs[0])
	for _, m := range msgs {
		if len(m) != n {
			panic("multisha: messages of unequal length")
		}
	}
	var dig [8][16]uint32
	for j := range dig {
		for l := range dig[j] {
			dig[j][l] = iv[j]
		}
	}
	var ptrs [Lanes]*byte
	full := n / 64
	// In runs of at most maxSteps: an assembly call cannot be preempted,
	// and a goroutine that does not stop holds up the whole program at the
	// garbage collector's stop-the-world.
	for done := 0; done < full; {
		k := min(full-done, maxSteps)
		for l := range ptrs {
			ptrs[l] = &msgs[l%len(msgs)][done*64]
		}
		block16(&dig, &ptrs, k)
		done += k
	}
	// The rest of each message, the 0x80 byte, zeros and the length in
	// bits: one more 64-byte step, or two when the length does not fit.
	var tails [Lanes][128]byte
	steps := 1
	if n%64 >= 56 {
		steps = 2
	}
	for l := range tails {
		t := &tails[l]
		r := copy(t[:], msgs[l%len(msgs)][full*64:])
		t[r] = 0x80
		binary.BigEndian.PutUint64(t[64*steps-8:], uint64(n)<<3)
		ptrs[l] = &t[0]
	}
	block16(&dig, &ptrs, steps)
	for l := range out {
		for j := range dig {
			binary.BigEndian.PutUint32(out[l][4*j:], dig[j][l])
		}
	}
}
