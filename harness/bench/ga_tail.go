package bench

import (
	"container/heap"
	"math"
	"slices"
)

// gaTailBound is the efficiency that p2pc's pull scheduling of islands
// equal tasks reaches on peers whose solo rates (tasks per second) are
// rates, if nothing but the scheduling were lost. Each peer of one slot
// holds up to window leases (the task it runs and those it prefetched,
// see internal/node's sched) and pulls another whenever it finishes one
// while tasks are left; once no more tasks are left than there are peers
// it is leased one only for its free slot (the queue's tail,
// internal/job/sched's tail.go). So the job ends when the last task does,
// and peers that finish earlier idle meanwhile (the tail). A peer alone
// is never idle. The result is islands / (makespan * sum(rates)). The
// coordinator's backup copies of slow tasks near the end are left out.
func gaTailBound(rates []float64, islands, window int) float64 {
	if islands < 1 || window < 1 || len(rates) == 0 || slices.ContainsFunc(rates, func(r float64) bool { return !(r > 0) }) {
		return math.NaN()
	}
	sum := 0.0
	held := make([]int, len(rates))
	left := islands
	take := func(i int) bool { // peer i may take one more lease now
		return held[i] < window && left > 0 && (held[i] == 0 || left > len(rates))
	}
	for range window { // every peer asks for its window at the start
		for i := range rates {
			if take(i) {
				held[i]++
				left--
			}
		}
	}
	h := &freeAt{}
	for i, r := range rates {
		sum += r
		if held[i] > 0 {
			heap.Push(h, peerFree{at: 1 / r, peer: i})
		}
	}
	end := 0.0
	for h.Len() > 0 {
		p := heap.Pop(h).(peerFree) // p.peer finishes a task at p.at
		end = math.Max(end, p.at)
		held[p.peer]--
		for take(p.peer) {
			held[p.peer]++
			left--
		}
		if held[p.peer] > 0 {
			p.at += 1 / rates[p.peer]
			heap.Push(h, p)
		}
	}
	return float64(islands) / (end * sum)
}

// gaWindow is how many leases a peer of one slot holds: its slot and a
// prefetch of one (internal/node's window: share + max(1, share/2)).
const gaWindow = 2

type peerFree struct {
	at   float64
	peer int
}

// freeAt is a min-heap of peers by when they are free, ties by index.
type freeAt []peerFree

func (h freeAt) Len() int { return len(h) }
func (h freeAt) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].peer < h[j].peer
}
func (h freeAt) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *freeAt) Push(x any)   { *h = append(*h, x.(peerFree)) }
func (h *freeAt) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// gaSpread is how far a measurement's rounds lie apart: (max - min) /
// median of the rates; NaN with one round.
func gaSpread(m Measure) float64 {
	if len(m.Rounds) < 2 || m.Rate == 0 {
		return math.NaN()
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range m.Rounds {
		lo, hi = math.Min(lo, r.Rate), math.Max(hi, r.Rate)
	}
	return (hi - lo) / m.Rate
}
