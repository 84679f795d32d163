package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Migrant payload: the value of an island's job-global variable.
//
//	offset  size       field
//	0       4          magic "TSPM"
//	4       4          island, big-endian uint32
//	8       4          generation, big-endian uint32
//	12      2          cities n, big-endian uint16
//	14      2          tour count k, big-endian uint16
//	16      k*2n       tours, each n big-endian uint16 city indices
const (
	migrantMagic  = "TSPM"
	migrantHeader = 16
)

// GlobalKey is the name of island i's job-global variable.
func GlobalKey(i int) string { return "tspga/best/" + strconv.Itoa(i) }

// maxMigrants is how many n-city tours fit in one job-global variable.
func maxMigrants(n int) int { return (sdk.MaxGlobalSize - migrantHeader) / (2 * n) }

func encodeMigrants(island, gen int, tours [][]int32) []byte {
	n := len(tours[0])
	b := make([]byte, 0, migrantHeader+len(tours)*2*n)
	b = append(b, migrantMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(island))
	b = binary.BigEndian.AppendUint32(b, uint32(gen))
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = binary.BigEndian.AppendUint16(b, uint16(len(tours)))
	for _, t := range tours {
		for _, c := range t {
			b = binary.BigEndian.AppendUint16(b, uint16(c))
		}
	}
	return b
}

// decodeMigrants reads a payload of tours of n cities and checks each is
// a permutation.
func decodeMigrants(b []byte, n int) (island int, tours [][]int32, err error) {
	if len(b) < migrantHeader || string(b[:4]) != migrantMagic {
		return 0, nil, errors.New("not a tspga migrant payload")
	}
	island = int(binary.BigEndian.Uint32(b[4:]))
	m, k := int(binary.BigEndian.Uint16(b[12:])), int(binary.BigEndian.Uint16(b[14:]))
	switch {
	case m != n:
		return 0, nil, fmt.Errorf("migrants have %d cities, the instance %d", m, n)
	case len(b) != migrantHeader+k*2*n:
		return 0, nil, fmt.Errorf("migrant payload of %d bytes, its header says %d", len(b), migrantHeader+k*2*n)
	}
	seen := make([]int, n)
	for i := range k {
		t := make([]int32, n)
		for j := range t {
			c := int(binary.BigEndian.Uint16(b[migrantHeader+2*(i*n+j):]))
			if c >= n || seen[c] == i+1 {
				return 0, nil, fmt.Errorf("migrant %d is not a tour", i)
			}
			seen[c] = i + 1
			t[j] = int32(c)
		}
		tours = append(tours, t)
	}
	return island, tours, nil
}

// sources returns the islands this island takes immigrants from.
func (p *Params) sources() []int {
	if p.Topology == TopologyRing {
		return []int{(p.Island - 1 + p.Islands) % p.Islands}
	}
	var s []int
	for i := range p.Islands {
		if i != p.Island {
			s = append(s, i)
		}
	}
	return s
}

// migrate publishes the island's best tours under its GlobalKey and takes
// in the best Migrants tours published by its sources. Host errors come
// back as they are, for the caller to judge.
func (is *island) migrate(ctx context.Context, host sdk.Host) error {
	k := min(is.p.Migrants, len(is.pop), maxMigrants(is.in.N()))
	tours := make([][]int32, k)
	for i := range k {
		tours[i] = is.pop[i].tour
	}
	if _, err := host.Store(ctx, GlobalKey(is.p.Island), encodeMigrants(is.p.Island, is.gen, tours)); err != nil {
		return err
	}
	var in []*indiv
	for _, src := range is.p.sources() {
		g, err := host.Load(ctx, GlobalKey(src))
		if err != nil {
			return err
		}
		if g.Version == 0 {
			continue // not published yet
		}
		_, ts, err := decodeMigrants(g.Value, is.in.N())
		if err != nil {
			continue // another program's variable: not ours to read
		}
		for _, t := range ts {
			in = append(in, is.finish(t))
		}
	}
	slices.SortFunc(in, compare)
	in = slices.CompactFunc(in, same)
	is.accept(in, is.p.Migrants)
	return nil
}
