package spec

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse64 parses a typical spec of 64 tasks: 48 from a range and
// 16 explicit ones.
func BenchmarkParse64(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("name: bench\nplugin: ./plugin\nparams: {width: 1024, height: 768, iterations: 500}\ntimeout: 1m\ntasks:\n")
	sb.WriteString("  - range: {param: band, from: 0, to: 47}\n    params: {quality: high}\n")
	for i := range 16 {
		fmt.Fprintf(&sb, "  - id: extra-%d\n    params: {band: %d, zoom: %d.5, tags: [a, b]}\n", i, i, i)
	}
	sb.WriteString("inputs:\n  - data/palette.txt\n")
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		j, err := Parse("bench.yaml", data, "/bench")
		if err != nil || j.Tasks.Len() != 64 {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonical64(b *testing.B) {
	j, err := Parse("bench.yaml", []byte("plugin: p\nparams: {w: 1, h: 2}\ntasks: [{range: {param: i, from: 0, to: 63}}]"), "/")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		j.Canonical()
	}
}

// BenchmarkTaskParamsJSON encodes a range task's params (the echo
// tracker's: {i, sleep_ms}) as the coordinator does for each task:
// from=map is the canonical encoding of the task's params map,
// from=pieces (TaskParamsJSON) the segment's pieces encoded once.
func BenchmarkTaskParamsJSON(b *testing.B) {
	j, err := Parse("bench.yaml", []byte("plugin: p\nparams: {sleep_ms: 0}\ntasks: [{range: {param: i, from: 0, to: 65535}}]"), "/")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("from=map", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			encode(nonNil(j.Tasks.At(i & 0xffff).Params))
			i++
		}
	})
	b.Run("from=pieces", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			j.TaskParamsJSON(i & 0xffff)
			i++
		}
	})
}
