package main

import (
	"context"
	"slices"
)

// indiv is one tour of a population, in canonical form (see canonical),
// with its length and a hash of its cities.
type indiv struct {
	tour   []int32
	length int64
	hash   uint64
}

// compare orders individuals by length, then hash, then cities: a total
// order, so sorting gives the same population whatever the algorithm.
func compare(a, b *indiv) int {
	switch {
	case a.length != b.length:
		if a.length < b.length {
			return -1
		}
		return 1
	case a.hash != b.hash:
		if a.hash < b.hash {
			return -1
		}
		return 1
	}
	return slices.Compare(a.tour, b.tour)
}

func same(a, b *indiv) bool {
	return a.length == b.length && a.hash == b.hash && slices.Equal(a.tour, b.tour)
}

// island is the state of one island's evolution: everything a checkpoint
// saves (population, generation, RNG, history, migrant count) and scratch
// space.
type island struct {
	in *Instance
	p  *Params

	rng        *rng
	pop        []*indiv // sorted by compare, distinct unless too few exist
	gen        int      // generations done
	history    []int64  // best length at generations 0, every, 2*every, ...
	every      int      // history stride
	migrantsIn int      // immigrants accepted so far

	ls  *localSearch
	pa  []int32 // positions of cities in parent a
	pb  []int32 // positions of cities in parent b
	use []int32 // generation stamps for crossover
	tag int32
	tmp []int32
}

// historyEvery returns the stride that keeps at most about maxHistory
// history entries.
func historyEvery(generations int) int {
	return max(1, (generations+maxHistory-1)/maxHistory)
}

// maxHistory bounds the history kept in the output and checkpoints.
const maxHistory = 2000

func newIsland(in *Instance, p *Params) *island {
	n := in.N()
	return &island{
		in:    in,
		p:     p,
		rng:   newRNG(p.Seed, p.Island),
		every: historyEvery(p.Generations),
		ls:    newLocalSearch(in),
		pa:    make([]int32, n),
		pb:    make([]int32, n),
		use:   make([]int32, n),
		tmp:   make([]int32, n),
	}
}

// seed fills the population with random tours, each improved by 2-opt,
// and records generation 0. It checks ctx before every tour.
func (is *island) seed(ctx context.Context) error {
	is.pop = is.pop[:0]
	for len(is.pop) < is.p.Population {
		if err := ctx.Err(); err != nil {
			return err
		}
		is.pop = append(is.pop, is.randomTour())
	}
	is.settle(is.pop)
	is.history = append(is.history[:0], is.best().length)
	return nil
}

// randomTour returns a uniform random tour, improved by 2-opt.
func (is *island) randomTour() *indiv {
	t := make([]int32, is.in.N())
	is.rng.perm(t)
	is.ls.run(t, t)
	return is.finish(t)
}

// finish canonicalizes t and computes its length and hash.
func (is *island) finish(t []int32) *indiv {
	canonical(t, is.tmp)
	return &indiv{tour: t, length: is.in.Length(t), hash: hashTour(t)}
}

func (is *island) best() *indiv { return is.pop[0] }

// settle sorts all, drops duplicates and keeps the best Population of them
// as the population. If there are too few distinct tours (a tiny instance
// has only (n-1)!/2), fresh random tours top it up, duplicates or not.
func (is *island) settle(all []*indiv) {
	slices.SortFunc(all, compare)
	out := all[:0]
	for _, x := range all {
		if len(out) > 0 && same(out[len(out)-1], x) {
			continue
		}
		out = append(out, x)
	}
	if len(out) < is.p.Population {
		for len(out) < is.p.Population {
			out = append(out, is.randomTour())
		}
		slices.SortFunc(out, compare)
	}
	is.pop = append(is.pop[:0:0], out[:is.p.Population]...)
}

// step evolves one generation: Population offspring, each from two
// tournament-selected parents by order crossover, mutated by a
// double-bridge move with probability MutationRate and improved by
// 2-opt; then the best Population distinct tours of parents and
// offspring survive (elitist (μ+λ) replacement). It checks ctx before
// every offspring.
func (is *island) step(ctx context.Context) error {
	P := len(is.pop)
	all := make([]*indiv, 0, 2*P)
	all = append(all, is.pop...)
	for range P {
		if err := ctx.Err(); err != nil {
			return err
		}
		a := is.tournament()
		b := is.tournament()
		if b == a && P > 1 {
			b = is.tournament()
		}
		all = append(all, is.offspring(is.pop[a], is.pop[b]))
	}
	is.settle(all)
	is.gen++
	if is.gen%is.every == 0 || is.gen == is.p.Generations {
		is.history = append(is.history, is.best().length)
	}
	return nil
}

// tournament returns the index of the best of Tournament individuals drawn
// with replacement (the population is sorted: the smallest index).
func (is *island) tournament() int {
	best := is.rng.intn(len(is.pop))
	for range is.p.Tournament - 1 {
		best = min(best, is.rng.intn(len(is.pop)))
	}
	return best
}

// offspring makes one child of a and b.
func (is *island) offspring(a, b *indiv) *indiv {
	n := is.in.N()
	child := make([]int32, n)
	is.orderCrossover(child, a.tour, b.tour)
	for i, c := range a.tour {
		is.pa[c] = int32(i)
	}
	for i, c := range b.tour {
		is.pb[c] = int32(i)
	}
	if is.rng.float64() < is.p.MutationRate {
		doubleBridge(child, is.tmp, is.rng)
	}
	// Only cities at edges that neither parent has need a look: the rest
	// of the tour is made of parental edges, already 2-optimal there.
	dirty := is.ls.dirty[:0]
	for i, c := range child {
		d := child[(i+1)%n]
		if !adjacent(is.pa, c, d, n) && !adjacent(is.pb, c, d, n) {
			dirty = append(dirty, c, d)
		}
	}
	is.ls.dirty = dirty
	is.ls.run(child, dirty)
	return is.finish(child)
}

// adjacent says whether cities c and d are next to each other in the tour
// whose positions are pos.
func adjacent(pos []int32, c, d int32, n int) bool {
	diff := pos[c] - pos[d]
	return diff == 1 || diff == -1 || diff == int32(n-1) || diff == -int32(n-1)
}

// orderCrossover is OX (Davis 1985): child gets a's cities between two
// random cut points in place, and the rest in the order they follow the
// second cut in b.
func (is *island) orderCrossover(child, a, b []int32) {
	n := len(a)
	i, j := is.rng.intn(n), is.rng.intn(n)
	if i > j {
		i, j = j, i
	}
	is.tag++
	if is.tag == 0 { // wrapped: clear the stamps
		clear(is.use)
		is.tag = 1
	}
	for k := i; k <= j; k++ {
		child[k] = a[k]
		is.use[a[k]] = is.tag
	}
	k := (j + 1) % n
	for s := range n {
		c := b[(j+1+s)%n]
		if is.use[c] == is.tag {
			continue
		}
		child[k] = c
		k = (k + 1) % n
	}
}

// doubleBridge is the 4-opt "double bridge" kick: tour A B C D becomes
// A C B D, a change 2-opt cannot undo in one move.
func doubleBridge(t, tmp []int32, r *rng) {
	n := len(t)
	if n < 8 {
		// Too small for three distinct cuts: reverse a random segment.
		i, j := r.intn(n), r.intn(n)
		if i > j {
			i, j = j, i
		}
		slices.Reverse(t[i : j+1])
		return
	}
	// Cuts 0 < p1 < p2 < p3 < n.
	p1 := 1 + r.intn(n-3)
	p2 := p1 + 1 + r.intn(n-p1-2)
	p3 := p2 + 1 + r.intn(n-p2-1)
	out := tmp[:0]
	out = append(out, t[:p1]...)
	out = append(out, t[p2:p3]...)
	out = append(out, t[p1:p2]...)
	out = append(out, t[p3:]...)
	copy(t, out)
}

// canonical rotates t to start at city 0 and turns it so that the second
// city is smaller than the last: one form per undirected tour.
func canonical(t, tmp []int32) {
	n := len(t)
	z := slices.Index(t, 0)
	out := tmp[:n]
	if t[(z+1)%n] < t[(z+n-1)%n] {
		for i := range n {
			out[i] = t[(z+i)%n]
		}
	} else {
		for i := range n {
			out[i] = t[(z-i+n)%n]
		}
	}
	copy(t, out)
}

// hashTour is FNV-1a over the cities.
func hashTour(t []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range t {
		h ^= uint64(uint32(c))
		h *= 1099511628211
	}
	return h
}

// accept puts up to limit of the immigrants (sorted, best first) into the
// population: each one that is not there yet and is shorter than the
// current worst replaces it. It returns how many it accepted.
func (is *island) accept(immigrants []*indiv, limit int) int {
	n := 0
	for _, m := range immigrants {
		if n == limit {
			break
		}
		if slices.ContainsFunc(is.pop, func(x *indiv) bool { return same(x, m) }) {
			continue
		}
		worst := len(is.pop) - 1
		if compare(m, is.pop[worst]) >= 0 {
			break // the rest are longer still
		}
		is.pop[worst] = m
		slices.SortFunc(is.pop, compare)
		n++
	}
	is.migrantsIn += n
	return n
}

// localSearch is 2-opt and Or-opt with neighbour lists and a queue of
// cities to look at ("don't-look bits"). For a city a and each of its
// nearest neighbours c it tries the 2-opt moves that make a and c
// adjacent, then the Or-opt moves that take the segment of 1 to 3 cities
// starting at a out and put it back next to c; it makes the first move
// that shortens the tour and queues the cities it touched.
type localSearch struct {
	in     *Instance
	t      []int32
	pos    []int32
	queue  []int32 // FIFO ring of cities to look at
	head   int
	count  int
	queued []bool
	dirty  []int32 // scratch for callers
}

func newLocalSearch(in *Instance) *localSearch {
	n := in.N()
	return &localSearch{in: in, pos: make([]int32, n), queue: make([]int32, n), queued: make([]bool, n)}
}

func (s *localSearch) push(c int32) {
	if s.queued[c] {
		return
	}
	s.queued[c] = true
	s.queue[(s.head+s.count)%len(s.queue)] = c
	s.count++
}

func (s *localSearch) pop() int32 {
	c := s.queue[s.head]
	s.head = (s.head + 1) % len(s.queue)
	s.count--
	s.queued[c] = false
	return c
}

// run improves tour t in place until no move from the queue helps. It
// starts with the cities in dirty in the queue (dirty may be t itself).
func (s *localSearch) run(t []int32, dirty []int32) {
	s.t = t
	for i, c := range t {
		s.pos[c] = int32(i)
	}
	s.head, s.count = 0, 0
	for _, c := range dirty {
		s.push(c)
	}
	for s.count > 0 {
		a := s.pop()
		if s.twoOpt(a) || s.orOpt(a) {
			s.push(a)
		}
	}
}

func (s *localSearch) succ(c int32) int32 {
	p := s.pos[c] + 1
	if int(p) == len(s.t) {
		p = 0
	}
	return s.t[p]
}

func (s *localSearch) pred(c int32) int32 {
	p := s.pos[c] - 1
	if p < 0 {
		p = int32(len(s.t) - 1)
	}
	return s.t[p]
}

// exchange is the 2-opt move that replaces edges (a, b) and (c, d) with
// (a, c) and (b, d), where walking the tour from a to b goes on to c and
// then d (forward or backward: exchange looks).
func (s *localSearch) exchange(a, b, c, d int32) {
	if s.succ(a) == b {
		s.reverse(s.pos[b], s.pos[c]) // a b ... c d -> a c ... b d
	} else {
		s.reverse(s.pos[c], s.pos[b]) // d c ... b a -> d b ... c a
	}
}

// twoOpt makes the first improving 2-opt move that joins a to one of its
// neighbours.
func (s *localSearch) twoOpt(a int32) bool {
	in := s.in
	for _, forward := range [2]bool{true, false} {
		var b int32
		if forward {
			b = s.succ(a)
		} else {
			b = s.pred(a)
		}
		dab := in.D(a, b)
		for _, c := range in.neigh[a] {
			dac := in.D(a, c)
			if dac >= dab {
				break
			}
			var d int32
			if forward {
				d = s.succ(c)
			} else {
				d = s.pred(c)
			}
			if c == b || d == a {
				continue
			}
			if dab+in.D(c, d)-dac-in.D(b, d) <= 0 {
				continue
			}
			s.exchange(a, b, c, d)
			s.push(b)
			s.push(c)
			s.push(d)
			return true
		}
	}
	return false
}

// orOpt makes the first improving Or-opt move of the segment a..z of 1 to
// 3 cities starting at a (going forward) to between a neighbour c of a
// and the city e next to c, with a next to c.
func (s *localSearch) orOpt(a int32) bool {
	in := s.in
	n := int32(len(s.t))
	z := a
	for l := int32(1); l <= 3 && l+4 <= n; l++ {
		if l > 1 {
			z = s.succ(z)
		}
		p, nx := s.pred(a), s.succ(z)
		g := in.D(p, a) + in.D(z, nx) - in.D(p, nx) // saved by taking a..z out
		if g <= 0 {
			continue
		}
		outside := func(c int32) bool {
			off := s.pos[c] - s.pos[a]
			if off < 0 {
				off += n
			}
			return off >= l && c != p && c != nx
		}
		for _, c := range in.neigh[a] {
			dca := in.D(c, a)
			if dca >= g {
				break
			}
			if !outside(c) {
				continue
			}
			for _, after := range [2]bool{true, false} {
				var e int32
				if after {
					e = s.succ(c)
				} else {
					e = s.pred(c)
				}
				if !outside(e) || dca+in.D(z, e)-in.D(c, e) >= g {
					continue
				}
				if after {
					// p a..z nx ... c e  ->  p nx ... c a..z e
					s.exchange(p, a, c, e)
					s.exchange(p, c, nx, z)
					s.exchange(c, z, a, e)
				} else {
					// p a..z nx ... e c  ->  p nx ... e z..a c
					s.exchange(z, nx, e, c)
					s.exchange(p, a, nx, c)
				}
				s.push(p)
				s.push(nx)
				s.push(z)
				s.push(c)
				s.push(e)
				return true
			}
		}
	}
	return false
}

// reverse reverses the cyclic segment of positions i to j (inclusive,
// going forward), or the rest of the tour if that is shorter: the same
// undirected tour either way.
func (s *localSearch) reverse(i, j int32) {
	n := int32(len(s.t))
	l := j - i
	if l < 0 {
		l += n
	}
	l++
	if 2*l > n {
		i, j = j+1, i-1
		if i == n {
			i = 0
		}
		if j < 0 {
			j = n - 1
		}
		l = n - l
	}
	t, pos := s.t, s.pos
	for range l / 2 {
		ci, cj := t[i], t[j]
		t[i], t[j] = cj, ci
		pos[cj], pos[ci] = i, j
		i++
		if i == n {
			i = 0
		}
		j--
		if j < 0 {
			j = n - 1
		}
	}
}
