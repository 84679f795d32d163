package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Limits on instances, so that a typo cannot ask a peer for gigabytes: the
// distance matrix takes 4*n*n bytes (36 MB at MaxCities).
const (
	MaxCities = 3000
	// MaxCoord bounds the absolute value of a coordinate, so that every
	// distance fits an int32 and every tour length an int64.
	MaxCoord = 1e7
	// MaxTSPLIBSize bounds a TSPLIB file.
	MaxTSPLIBSize = 16 << 20
	// Side is the side of the square of generated instances: cities have
	// integer coordinates in [0, Side).
	Side = 1000
	// neighbours is how many nearest cities the local search tries to
	// connect each city to.
	neighbours = 12
)

// Instance is a symmetric TSP instance with TSPLIB EUC_2D distances: the
// Euclidean distance rounded to the nearest integer. Integer distances make
// tour lengths exact, so equal tours have equal lengths on every machine.
type Instance struct {
	Name string
	X, Y []float64

	n     int
	dist  []int32   // n*n, row-major
	neigh [][]int32 // for each city, its nearest others, nearest first
}

// NewInstance computes the distances and neighbour lists of the cities at
// xs, ys.
func NewInstance(name string, xs, ys []float64) (*Instance, error) {
	n := len(xs)
	switch {
	case n != len(ys):
		return nil, errors.New("tspga: as many x as y coordinates are needed")
	case n < 3 || n > MaxCities:
		return nil, fmt.Errorf("tspga: %d cities: need 3 to %d", n, MaxCities)
	}
	for i := range n {
		if !finite(xs[i], ys[i]) || math.Abs(xs[i]) > MaxCoord || math.Abs(ys[i]) > MaxCoord {
			return nil, fmt.Errorf("tspga: city %d at (%v, %v): coordinates must be finite and within ±%g", i+1, xs[i], ys[i], MaxCoord)
		}
	}
	in := &Instance{Name: name, X: slices.Clone(xs), Y: slices.Clone(ys), n: n, dist: make([]int32, n*n)}
	for i := range n {
		for j := i + 1; j < n; j++ {
			d := euc2D(xs[i], ys[i], xs[j], ys[j])
			in.dist[i*n+j], in.dist[j*n+i] = d, d
		}
	}
	k := min(neighbours, n-1)
	in.neigh = make([][]int32, n)
	order := make([]int32, 0, n-1)
	for i := range n {
		order = order[:0]
		for j := range n {
			if j != i {
				order = append(order, int32(j))
			}
		}
		row := in.dist[i*n : (i+1)*n]
		slices.SortFunc(order, func(a, b int32) int {
			if c := int(row[a]) - int(row[b]); c != 0 {
				return c
			}
			return int(a) - int(b)
		})
		in.neigh[i] = slices.Clone(order[:k])
	}
	return in, nil
}

// euc2D is TSPLIB's EUC_2D distance, nint(sqrt(dx² + dy²)). The explicit
// float64 conversions round each product, which forbids the compiler to
// fuse them into a multiply-add: the distance is the same on every GOARCH.
func euc2D(x1, y1, x2, y2 float64) int32 {
	dx, dy := x1-x2, y1-y2
	return int32(math.Sqrt(float64(dx*dx)+float64(dy*dy)) + 0.5)
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// N is the number of cities.
func (in *Instance) N() int { return in.n }

// D is the distance between cities a and b.
func (in *Instance) D(a, b int32) int32 { return in.dist[int(a)*in.n+int(b)] }

// Length is the length of the closed tour t.
func (in *Instance) Length(t []int32) int64 {
	var l int64
	prev := t[len(t)-1]
	for _, c := range t {
		l += int64(in.D(prev, c))
		prev = c
	}
	return l
}

// Generate returns n cities with uniform random integer coordinates in
// [0, Side)², drawn from seed.
func Generate(n int, seed int64) (*Instance, error) {
	if n < 3 || n > MaxCities {
		return nil, fmt.Errorf("tspga: cities %d: need 3 to %d", n, MaxCities)
	}
	r := newRNG(seed, -1)
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i] = float64(r.intn(Side))
		ys[i] = float64(r.intn(Side))
	}
	return NewInstance(fmt.Sprintf("random-%d-%d", n, seed), xs, ys)
}

// ReadTSPLIB reads a TSPLIB file (see ParseTSPLIB).
func ReadTSPLIB(path string) (*Instance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tspga: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTSPLIBSize+1))
	if err != nil {
		return nil, fmt.Errorf("tspga: read %s: %w", path, err)
	}
	return ParseTSPLIB(b)
}

// ParseTSPLIB parses a symmetric TSP instance in TSPLIB format with
// EDGE_WEIGHT_TYPE EUC_2D: "KEY : value" header lines (NAME, TYPE,
// DIMENSION and EDGE_WEIGHT_TYPE are read; COMMENT and other keys are
// ignored), then NODE_COORD_SECTION with one "index x y" line per city
// (indices 1 to DIMENSION, each once, in any order), then an optional
// EOF. Other sections are refused.
func ParseTSPLIB(b []byte) (*Instance, error) {
	if len(b) > MaxTSPLIBSize {
		return nil, fmt.Errorf("tspga: TSPLIB file over %d bytes", MaxTSPLIBSize)
	}
	var (
		name       string
		dim        = -1
		weightType string
		xs, ys     []float64
		seen       []bool
		inCoords   bool
		got        int
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxTSPLIBSize)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if text == "EOF" {
			break
		}
		if inCoords && got < dim {
			f := strings.Fields(text)
			if len(f) != 3 {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: want \"index x y\", got %q", line, text)
			}
			idx, err := strconv.Atoi(f[0])
			if err != nil || idx < 1 || idx > dim {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: node index %q is not in [1, %d]", line, f[0], dim)
			}
			if seen[idx-1] {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: node %d given twice", line, idx)
			}
			x, errx := strconv.ParseFloat(f[1], 64)
			y, erry := strconv.ParseFloat(f[2], 64)
			if errx != nil || erry != nil {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: bad coordinates %q %q", line, f[1], f[2])
			}
			seen[idx-1], xs[idx-1], ys[idx-1] = true, x, y
			got++
			continue
		}
		key, value, hasColon := strings.Cut(text, ":")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "NAME":
			name = value
		case "TYPE":
			if value != "TSP" {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: TYPE %q: only TSP is supported", line, value)
			}
		case "DIMENSION":
			n, err := strconv.Atoi(value)
			if err != nil || n < 3 || n > MaxCities {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: DIMENSION %q: need 3 to %d", line, value, MaxCities)
			}
			dim = n
		case "EDGE_WEIGHT_TYPE":
			if value != "EUC_2D" {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: EDGE_WEIGHT_TYPE %q: only EUC_2D is supported", line, value)
			}
			weightType = value
		case "NODE_COORD_SECTION":
			switch {
			case dim < 0:
				return nil, fmt.Errorf("tspga: TSPLIB line %d: NODE_COORD_SECTION before DIMENSION", line)
			case inCoords:
				return nil, fmt.Errorf("tspga: TSPLIB line %d: a second NODE_COORD_SECTION", line)
			}
			inCoords = true
			xs, ys, seen = make([]float64, dim), make([]float64, dim), make([]bool, dim)
		default:
			if strings.HasSuffix(key, "_SECTION") {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: %s is not supported", line, key)
			}
			if !hasColon {
				return nil, fmt.Errorf("tspga: TSPLIB line %d: unexpected %q", line, text)
			}
			// COMMENT, OPTIMUM and other header keys carry nothing we need.
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tspga: TSPLIB: %w", err)
	}
	switch {
	case weightType == "":
		return nil, errors.New("tspga: TSPLIB: no EDGE_WEIGHT_TYPE (only EUC_2D is supported)")
	case !inCoords:
		return nil, errors.New("tspga: TSPLIB: no NODE_COORD_SECTION")
	case got < dim:
		return nil, fmt.Errorf("tspga: TSPLIB: %d of %d nodes given", got, dim)
	}
	if name == "" {
		name = "tsplib"
	}
	return NewInstance(name, xs, ys)
}
