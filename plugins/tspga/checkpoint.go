package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Checkpoint format: an island's whole state at a generation boundary.
//
//	offset  size     field
//	0       8        magic "TSPGACP1"
//	8       32       fingerprint of the run (see fingerprint)
//	40      4        generation g, big-endian uint32
//	44      8        RNG state, big-endian uint64
//	52      8        immigrants accepted so far, big-endian uint64
//	60      4        cities n, big-endian uint32
//	64      4        population size P, big-endian uint32
//	68      4        history entries h, big-endian uint32
//	72      P*2n     tours, best first, each n big-endian uint16 cities
//	...     8h       history, big-endian int64 tour lengths
const (
	checkpointMagic  = "TSPGACP1"
	checkpointHeader = 72
)

// fingerprint identifies what an island computes: every param but
// checkpoint_every, and the cities' coordinates. A checkpoint of another
// run (other params, another instance) is not resumed.
func fingerprint(p *Params, in *Instance) [32]byte {
	q := *p
	q.CheckpointEvery = 0
	pj, _ := json.Marshal(q) // a struct of plain fields: cannot fail
	h := sha256.New()
	h.Write([]byte("tspga checkpoint v1\n"))
	h.Write(pj)
	var b [8]byte
	for i := range in.N() {
		binary.BigEndian.PutUint64(b[:], math.Float64bits(in.X[i]))
		h.Write(b[:])
		binary.BigEndian.PutUint64(b[:], math.Float64bits(in.Y[i]))
		h.Write(b[:])
	}
	return [32]byte(h.Sum(nil))
}

// checkpointSize is the size of an island's checkpoint.
func checkpointSize(n, pop, hist int) int { return checkpointHeader + pop*2*n + 8*hist }

// marshal encodes the island's state.
func (is *island) marshal(fp [32]byte) []byte {
	n := is.in.N()
	b := make([]byte, 0, checkpointSize(n, len(is.pop), len(is.history)))
	b = append(b, checkpointMagic...)
	b = append(b, fp[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(is.gen))
	b = binary.BigEndian.AppendUint64(b, is.rng.state)
	b = binary.BigEndian.AppendUint64(b, uint64(is.migrantsIn))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, uint32(len(is.pop)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(is.history)))
	for _, x := range is.pop {
		for _, c := range x.tour {
			b = binary.BigEndian.AppendUint16(b, uint16(c))
		}
	}
	for _, l := range is.history {
		b = binary.BigEndian.AppendUint64(b, uint64(l))
	}
	return b
}

// historyLen is how many history entries an island has after gen
// generations.
func (is *island) historyLen(gen int) int {
	h := 1 + gen/is.every
	if gen == is.p.Generations && gen%is.every != 0 {
		h++
	}
	return h
}

// unmarshal restores the island's state from a checkpoint of the same run
// (same fingerprint), checking everything it reads.
func (is *island) unmarshal(b []byte, fp [32]byte) error {
	if len(b) < checkpointHeader || string(b[:8]) != checkpointMagic {
		return errors.New("not a tspga checkpoint")
	}
	if [32]byte(b[8:40]) != fp {
		return errors.New("checkpoint of another run (params or instance differ)")
	}
	gen := int(binary.BigEndian.Uint32(b[40:]))
	state := binary.BigEndian.Uint64(b[44:])
	migrantsIn := binary.BigEndian.Uint64(b[52:])
	n := int(binary.BigEndian.Uint32(b[60:]))
	pop := int(binary.BigEndian.Uint32(b[64:]))
	hist := int(binary.BigEndian.Uint32(b[68:]))
	switch {
	case n != is.in.N() || pop != is.p.Population:
		return fmt.Errorf("checkpoint of %d tours of %d cities, want %d of %d", pop, n, is.p.Population, is.in.N())
	case gen > is.p.Generations:
		return fmt.Errorf("checkpoint at generation %d of %d", gen, is.p.Generations)
	case hist != is.historyLen(gen):
		return fmt.Errorf("checkpoint at generation %d has %d history entries, want %d", gen, hist, is.historyLen(gen))
	case migrantsIn > math.MaxInt32:
		return fmt.Errorf("checkpoint counts %d immigrants", migrantsIn)
	case len(b) != checkpointSize(n, pop, hist):
		return fmt.Errorf("checkpoint of %d bytes, its header says %d", len(b), checkpointSize(n, pop, hist))
	}
	tours := make([]*indiv, pop)
	seen := make([]int, n)
	off := checkpointHeader
	for i := range tours {
		t := make([]int32, n)
		for j := range t {
			c := int(binary.BigEndian.Uint16(b[off:]))
			off += 2
			if c >= n || seen[c] == i+1 {
				return fmt.Errorf("checkpoint tour %d is not a tour", i)
			}
			seen[c] = i + 1
			t[j] = int32(c)
		}
		tours[i] = is.finish(t)
	}
	history := make([]int64, hist)
	for i := range history {
		history[i] = int64(binary.BigEndian.Uint64(b[off:]))
		off += 8
	}
	slices.SortFunc(tours, compare)
	is.pop, is.gen, is.rng.state, is.migrantsIn, is.history = tours, gen, state, int(migrantsIn), history
	return nil
}
