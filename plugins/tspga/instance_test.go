package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseTSPLIB(t *testing.T) {
	good := "NAME : tiny\nCOMMENT: x\nTYPE: TSP\nDIMENSION: 4\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n2 3 0\n1 0 0\n 3   3 4 \n4 0 4\nEOF\n"
	in, err := ParseTSPLIB([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "tiny" || in.N() != 4 || in.D(0, 2) != 5 || in.D(1, 0) != 3 || in.Length([]int32{0, 1, 2, 3}) != 14 {
		t.Errorf("parsed %+v", in)
	}
	if _, err := ParseTSPLIB([]byte(strings.TrimSuffix(good, "EOF\n"))); err != nil {
		t.Errorf("without EOF: %v", err)
	}
	tests := []struct{ text, want string }{
		{strings.Replace(good, "EUC_2D", "GEO", 1), "only EUC_2D"},
		{strings.Replace(good, "TYPE: TSP", "TYPE: ATSP", 1), "only TSP"},
		{strings.Replace(good, "EDGE_WEIGHT_TYPE : EUC_2D\n", "", 1), "no EDGE_WEIGHT_TYPE"},
		{strings.Replace(good, "DIMENSION: 4", "DIMENSION: 5", 1), "4 of 5 nodes"},
		{strings.Replace(good, "DIMENSION: 4", "DIMENSION: 2", 1), "DIMENSION"},
		{strings.Replace(good, "DIMENSION: 4\n", "", 1), "before DIMENSION"},
		{strings.Replace(good, "2 3 0", "1 3 0", 1), "given twice"},
		{strings.Replace(good, "2 3 0", "9 3 0", 1), "not in [1, 4]"},
		{strings.Replace(good, "2 3 0", "2 3", 1), "index x y"},
		{strings.Replace(good, "2 3 0", "2 3 zz", 1), "bad coordinates"},
		{strings.Replace(good, "2 3 0", "2 3 NaN", 1), "finite"},
		{strings.Replace(good, "2 3 0", "2 3 1e9", 1), "finite"},
		{strings.Replace(good, "EOF", "5 1 1", 1), "unexpected"},
		{strings.Replace(good, "EOF", "DISPLAY_DATA_SECTION", 1), "not supported"},
		{"NAME: x\n", "no EDGE_WEIGHT_TYPE"},
	}
	for _, tt := range tests {
		if _, err := ParseTSPLIB([]byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want it to mention %q", tt.text, err, tt.want)
		}
	}
}

func FuzzParseTSPLIB(f *testing.F) {
	if b, err := os.ReadFile("testdata/berlin52.tsp"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("DIMENSION: 3\nEDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 1 1\n3 2 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseTSPLIB(b)
		if err != nil {
			return
		}
		if in.N() < 3 || in.N() > MaxCities || len(in.neigh) != in.N() {
			t.Fatalf("parsed an instance of %d cities", in.N())
		}
	})
}

func TestGenerate(t *testing.T) {
	a, _ := Generate(20, 5)
	b, _ := Generate(20, 5)
	c, _ := Generate(20, 6)
	for i := range 20 {
		if a.X[i] != b.X[i] || a.Y[i] != b.Y[i] {
			t.Fatal("same seed, different cities")
		}
		if a.X[i] < 0 || a.X[i] >= Side || a.Y[i] < 0 || a.Y[i] >= Side || a.X[i] != float64(int(a.X[i])) {
			t.Fatalf("city %d at (%v, %v)", i, a.X[i], a.Y[i])
		}
	}
	if a.X[0] == c.X[0] && a.X[1] == c.X[1] {
		t.Error("different seeds, same cities")
	}
	if _, err := Generate(2, 1); err == nil {
		t.Error("2 cities accepted")
	}
}
