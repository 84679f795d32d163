package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

// small is a quick image for tests: 128x96 with enough detail.
func small() map[string]any {
	return map[string]any{"width": 128, "height": 96, "max_iter": 300}
}

func with(m map[string]any, kv ...any) map[string]any {
	m = maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// renderAll renders every band of job in parallel through sdktest and
// returns their outputs (to be cleaned up by the caller's test).
func renderAll(t testing.TB, job map[string]any) []sdk.TaskOutput {
	t.Helper()
	p := DefaultParams()
	b, _ := json.Marshal(job)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	outs := make([]sdk.TaskOutput, p.Bands)
	errs := make([]error, p.Bands)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for band := range p.Bands {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := sdktest.Run(context.Background(), Task{}, with(job, "band", band))
			if err != nil {
				errs[band] = err
				return
			}
			t.Cleanup(func() { out.Cleanup() })
			outs[band] = out.Output(fmt.Sprintf("band-%d", band))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return outs
}

// reduce runs the reduce step and returns the PNG.
func reduce(t testing.TB, job map[string]any, outs []sdk.TaskOutput) []byte {
	t.Helper()
	red, err := sdktest.Reduce(context.Background(), Task{}, job, outs)
	if err != nil {
		t.Fatal(err)
	}
	defer red.Cleanup()
	if len(red.Result.Files) != 1 || red.Result.Files[0] != OutputFile {
		t.Fatalf("reduce lists %q", red.Result.Files)
	}
	return red.Files[OutputFile]
}

func TestPNGSameForAnyBandSplit(t *testing.T) {
	var first []byte
	for _, bands := range []int{1, 7, 64, 96} {
		job := with(small(), "bands", bands)
		got := reduce(t, job, renderAll(t, job))
		if first == nil {
			first = got
			img, err := png.Decode(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != 128 || b.Dy() != 96 {
				t.Fatalf("image is %v", b)
			}
			continue
		}
		if !bytes.Equal(got, first) {
			t.Errorf("%d bands: PNG differs from the one of 1 band", bands)
		}
	}
}

func TestReduceAnyOrder(t *testing.T) {
	job := with(small(), "bands", 9)
	outs := renderAll(t, job)
	want := reduce(t, job, outs)
	rand.Shuffle(len(outs), func(i, j int) { outs[i], outs[j] = outs[j], outs[i] })
	if !bytes.Equal(reduce(t, job, outs), want) {
		t.Error("PNG depends on the order of the tasks")
	}
}

// TestGoldenPixels pins the pixels of a small render. It guards the
// Portable promise: if it fails on some GOARCH (or with GOAMD64=v3), a
// product lost its float64() conversion and got fused.
func TestGoldenPixels(t *testing.T) {
	p := DefaultParams()
	p.Width, p.Height, p.MaxIter, p.Bands = 160, 120, 2000, 1
	data, err := renderBand(context.Background(), &p, 0, func(float64) {})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data[headerSize:])
	if got := hex.EncodeToString(sum[:]); got != goldenPixels {
		t.Errorf("sha256 of the pixels = %s, want %s", got, goldenPixels)
	}
}

const goldenPixels = "5270568f5bfc40a590662ef2305ea6f032bf14dc39cc2dfc114cd77982118f4b"

func TestRows(t *testing.T) {
	for _, height := range []int{1, 2, 7, 96, 768, 1000} {
		for bands := 1; bands <= height; bands++ {
			p := Params{Height: height, Bands: bands}
			next := 0
			for b := range bands {
				first, end := p.Rows(b)
				if first != next || end <= first {
					t.Fatalf("height %d, %d bands: band %d is [%d, %d), want it to start at %d and not be empty", height, bands, b, first, end, next)
				}
				next = end
			}
			if next != height {
				t.Fatalf("height %d, %d bands: bands end at %d", height, bands, next)
			}
		}
	}
	p := Params{Height: MaxSide, Bands: MaxSide - 1}
	if first, end := p.Rows(MaxSide - 2); end != MaxSide || first >= end {
		t.Errorf("last band of a tall image: [%d, %d)", first, end)
	}
}

func TestRun(t *testing.T) {
	out, err := sdktest.Run(context.Background(), Task{}, with(small(), "bands", 8, "band", 3))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	data := out.Files[sdk.DataFile]
	h, err := parseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	if h != (header{First: 36, Rows: 12, Width: 128}) || len(data) != headerSize+12*128 {
		t.Errorf("header %+v, %d bytes", h, len(data))
	}
	if n := len(out.Progress); n < 1 || n > 11 || out.Progress[n-1] != 1 {
		t.Errorf("progress = %v", out.Progress)
	}
	if len(out.Result.Files) != 0 {
		t.Errorf("files = %q", out.Result.Files)
	}
}

func TestProgressCalls(t *testing.T) {
	for _, rows := range []int{1, 9, 10, 11, 99, 768} {
		p := DefaultParams()
		p.Width, p.Height, p.MaxIter, p.Bands = 4, rows, 10, 1
		var got []float64
		if _, err := renderBand(context.Background(), &p, 0, func(f float64) { got = append(got, f) }); err != nil {
			t.Fatal(err)
		}
		if len(got) < 1 || len(got) > 11 || got[len(got)-1] != 1 {
			t.Errorf("%d rows: progress %v", rows, got)
		}
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"no band", small(), "needs a band param"},
		{"band too big", with(small(), "bands", 4, "band", 4), "band 4 is not in [0, 4)"},
		{"band negative", with(small(), "band", -1), "band -1 is not in [0, 64)"},
		{"band not a number", with(small(), "band", "1"), "decode params"},
		{"width zero", with(small(), "width", 0, "band", 0), "width and height must be in [1, 65536]"},
		{"height too big", with(small(), "height", MaxSide+1, "band", 0), "width and height must be"},
		{"too many pixels", with(small(), "width", MaxSide, "height", MaxSide, "band", 0), "more than 268435456 pixels"},
		{"max_iter zero", with(small(), "max_iter", 0, "band", 0), "max_iter 0 must be in"},
		{"empty region", with(small(), "x_min", 1, "x_max", 1, "band", 0), "need x_min < x_max"},
		{"upside down", with(small(), "y_min", 1, "y_max", -1, "band", 0), "need x_min < x_max and y_min < y_max"},
		{"more bands than rows", with(small(), "bands", 97, "band", 0), "bands 97 must be in [1, height 96]"},
		{"zero bands", with(small(), "bands", 0, "band", 0), "bands 0 must be in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sdktest.Run(context.Background(), Task{}, tt.params)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	t.Run("one band needs no band param", func(t *testing.T) {
		out, err := sdktest.Run(context.Background(), Task{}, with(small(), "bands", 1))
		if err != nil {
			t.Fatal(err)
		}
		out.Cleanup()
	})
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := sdktest.Run(ctx, Task{}, map[string]any{"width": 4096, "height": 64, "max_iter": 1 << 20, "bands": 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
}

// writeBand writes band data with header h (and pixels as long as the
// header says, plus extra bytes) and returns it as a task output.
func writeBand(t *testing.T, id string, h header, extra int) sdk.TaskOutput {
	t.Helper()
	data := h.append(nil)
	data = append(data, make([]byte, h.Rows*h.Width+extra)...)
	p := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return sdk.TaskOutput{TaskID: id, Files: []sdk.File{{Name: sdk.DataFile, Path: p}}}
}

func TestReduceRejects(t *testing.T) {
	job := map[string]any{"width": 10, "height": 20, "bands": 2}
	band := func(id string, first, rows int) sdk.TaskOutput {
		return writeBand(t, id, header{First: first, Rows: rows, Width: 10}, 0)
	}
	garbage := filepath.Join(t.TempDir(), "data")
	os.WriteFile(garbage, []byte("PNG\x00not a band at all"), 0o644)
	short := filepath.Join(t.TempDir(), "data")
	os.WriteFile(short, []byte("MBND"), 0o644)
	tests := []struct {
		name  string
		tasks []sdk.TaskOutput
		want  string
	}{
		{"ok", []sdk.TaskOutput{band("a", 0, 10), band("b", 10, 10)}, ""},
		{"ok uneven", []sdk.TaskOutput{band("b", 3, 17), band("a", 0, 3)}, ""},
		{"overlap", []sdk.TaskOutput{band("a", 0, 11), band("b", 10, 10)}, "tasks a and b overlap at row 10"},
		{"duplicate", []sdk.TaskOutput{band("a", 0, 10), band("b", 10, 10), band("c", 10, 10)}, "tasks b and c overlap at row 10"},
		{"gap", []sdk.TaskOutput{band("a", 0, 9), band("b", 10, 10)}, "rows 9 to 9 are missing"},
		{"missing first", []sdk.TaskOutput{band("b", 10, 10)}, "rows 0 to 9 are missing"},
		{"missing last", []sdk.TaskOutput{band("a", 0, 10)}, "rows 10 to 19 are missing"},
		{"none", nil, "rows 0 to 19 are missing"},
		{"too tall", []sdk.TaskOutput{band("a", 0, 10), band("b", 10, 11)}, "task b has rows up to 20, the image is 20 high"},
		{"wrong width", []sdk.TaskOutput{band("a", 0, 10), writeBand(t, "b", header{First: 10, Rows: 10, Width: 11}, 0)}, "task b has rows of 11 pixels, the image is 10 wide"},
		{"extra bytes", []sdk.TaskOutput{band("a", 0, 10), writeBand(t, "b", header{First: 10, Rows: 10, Width: 10}, 1)}, "task b: band data is 117 bytes, its header (10 rows of 10 pixels) says 116"},
		{"truncated", []sdk.TaskOutput{band("a", 0, 10), writeBand(t, "b", header{First: 10, Rows: 10, Width: 10}, -1)}, "says 116"},
		{"bad magic", []sdk.TaskOutput{{TaskID: "g", Files: []sdk.File{{Name: sdk.DataFile, Path: garbage}}}}, `task g: band data starts with "PNG\x00", not "MBND"`},
		{"short header", []sdk.TaskOutput{{TaskID: "s", Files: []sdk.File{{Name: sdk.DataFile, Path: short}}}}, "band data of 4 bytes is shorter than its 16-byte header"},
		{"no data", []sdk.TaskOutput{{TaskID: "n", Files: []sdk.File{{Name: "other", Path: garbage}}}}, "task n has no band data"},
		{"zero rows", []sdk.TaskOutput{writeBand(t, "z", header{First: 0, Rows: 0, Width: 10}, 0)}, "band header out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sdktest.Reduce(context.Background(), Task{}, job, tt.tasks)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				out.Cleanup()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestPalette(t *testing.T) {
	if len(Palette) != 256 {
		t.Fatalf("%d colours", len(Palette))
	}
	if r, g, b, _ := Palette[0].RGBA(); r|g|b != 0 {
		t.Error("inside is not black")
	}
	if r, g, b, _ := Palette[1].RGBA(); r>>8 != 0 || g>>8 != 7 || b>>8 != 100 {
		t.Errorf("colour 1 = %v", Palette[1])
	}
}

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, Task{},
		sdktest.Case{Name: "first band", Params: with(small(), "bands", 4, "band", 0)},
		sdktest.Case{Name: "middle band", Params: with(small(), "bands", 4, "band", 2)},
		sdktest.Case{Name: "one band", Params: with(small(), "bands", 1)},
		sdktest.Case{Name: "demo band", Params: map[string]any{"band": 32}},
	)
}

func TestDescribe(t *testing.T) {
	if info := (Task{}).Describe(); info.Name != "mandelbrot" || !info.Portable {
		t.Errorf("info = %+v", info)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(header{First: 3, Rows: 4, Width: 5}.append(nil))
	f.Add([]byte("MBND\xff\xff\xff\xff\x00\x00\x00\x01\x00\x00\x00\x01"))
	f.Add([]byte("nope"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		if h.Rows < 1 || h.Width < 1 || h.First < 0 || h.First >= MaxSide {
			t.Fatalf("accepted %+v", h)
		}
		if !bytes.Equal(h.append(nil), b[:headerSize]) {
			t.Fatalf("header %+v does not round-trip", h)
		}
	})
}

// BenchmarkBand renders the middle band (the heaviest: it crosses the
// main cardioid) of the default job: 1920x1440, max_iter 2000, 64 bands.
func BenchmarkBand(b *testing.B) {
	p := DefaultParams()
	for b.Loop() {
		if _, err := renderBand(context.Background(), &p, p.Bands/2, func(float64) {}); err != nil {
			b.Fatal(err)
		}
	}
	first, end := p.Rows(p.Bands / 2)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64((end-first)*p.Width), "ns/pixel")
}

// BenchmarkImage renders the whole default image in one band on one core.
func BenchmarkImage(b *testing.B) {
	p := DefaultParams()
	p.Bands = 1
	for b.Loop() {
		if _, err := renderBand(context.Background(), &p, 0, func(float64) {}); err != nil {
			b.Fatal(err)
		}
	}
}
