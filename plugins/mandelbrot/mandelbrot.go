package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Limits on the image, so that a typo cannot ask a peer for terabytes.
const (
	MaxSide   = 1 << 16 // pixels, width or height
	MaxPixels = 1 << 28 // width * height
	MaxIter   = 1 << 24
)

// Params are the job-level params; see docs/plugins/mandelbrot.md.
type Params struct {
	Width   int     `json:"width"`
	Height  int     `json:"height"`
	MaxIter int     `json:"max_iter"`
	XMin    float64 `json:"x_min"`
	XMax    float64 `json:"x_max"`
	YMin    float64 `json:"y_min"`
	YMax    float64 `json:"y_max"`
	Bands   int     `json:"bands"`
}

// DefaultParams are the params a job gets for every key it leaves out:
// the whole set in a 4:3 image with square pixels, sized so that the demo
// takes a few seconds on two cores.
func DefaultParams() Params {
	return Params{
		Width:   1920,
		Height:  1440,
		MaxIter: 2000,
		XMin:    -2.5,
		XMax:    1.0,
		YMin:    -1.3125,
		YMax:    1.3125,
		Bands:   64,
	}
}

// decodeParams reads job params over the defaults and validates them.
func decodeParams(decode func(any) error) (Params, error) {
	p := DefaultParams()
	if err := decode(&p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// Validate checks the params.
func (p *Params) Validate() error {
	switch {
	case p.Width < 1 || p.Width > MaxSide || p.Height < 1 || p.Height > MaxSide:
		return fmt.Errorf("mandelbrot: image %dx%d: width and height must be in [1, %d]", p.Width, p.Height, MaxSide)
	case int64(p.Width)*int64(p.Height) > MaxPixels:
		return fmt.Errorf("mandelbrot: image %dx%d has more than %d pixels", p.Width, p.Height, MaxPixels)
	case p.MaxIter < 1 || p.MaxIter > MaxIter:
		return fmt.Errorf("mandelbrot: max_iter %d must be in [1, %d]", p.MaxIter, MaxIter)
	case !finite(p.XMin, p.XMax, p.YMin, p.YMax):
		return errors.New("mandelbrot: the region must be finite numbers")
	case p.XMin >= p.XMax || p.YMin >= p.YMax:
		return fmt.Errorf("mandelbrot: empty region x [%v, %v], y [%v, %v]: need x_min < x_max and y_min < y_max", p.XMin, p.XMax, p.YMin, p.YMax)
	case p.Bands < 1 || p.Bands > p.Height:
		return fmt.Errorf("mandelbrot: bands %d must be in [1, height %d]", p.Bands, p.Height)
	}
	return nil
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// Rows returns the rows [first, end) of band b: integer arithmetic, so
// that the bands tile the image exactly for any number of bands.
func (p *Params) Rows(b int) (first, end int) {
	h, n := int64(p.Height), int64(p.Bands)
	return int(int64(b) * h / n), int(int64(b+1) * h / n)
}

// Pixel values: 0 for a point that did not escape within max_iter, else
// 1 + (escape iteration mod 255), an index into Palette.
func pixel(iter, maxIter int) uint8 {
	if iter >= maxIter {
		return 0
	}
	return uint8(1 + iter%255)
}

// escape returns the number of iterations of z = z*z + c, from z = 0,
// after which |z| > 2, or maxIter if that does not happen.
//
// Every product is wrapped in an explicit float64 conversion: the Go spec
// lets a compiler fuse x*y + z into one fused multiply-add (arm64,
// ppc64le, s390x, riscv64 and amd64 with GOAMD64=v3 do), which rounds
// once instead of twice and changes the escape counts of some pixels. An
// explicit conversion rounds the product and so forbids the fusion: the
// image is then the same on every GOARCH, which redundant execution on
// mixed peers needs (Describe says Portable).
func escape(cx, cy float64, maxIter int) int {
	var x, y float64
	for i := 0; i < maxIter; i++ {
		x2 := float64(x * x)
		y2 := float64(y * y)
		if x2+y2 > 4 {
			return i
		}
		y = float64(2*x*y) + cy
		x = x2 - y2 + cx
	}
	return maxIter
}

// renderRow writes the pixels of image row py into dst (len p.Width).
// The point of a pixel depends only on its indices and the params, with
// the same formula in every band split.
func renderRow(dst []uint8, p *Params, py int) {
	dx := (p.XMax - p.XMin) / float64(p.Width)
	dy := (p.YMax - p.YMin) / float64(p.Height)
	cy := p.YMax - float64((float64(py)+0.5)*dy)
	for px := range dst {
		cx := p.XMin + float64((float64(px)+0.5)*dx)
		dst[px] = pixel(escape(cx, cy, p.MaxIter), p.MaxIter)
	}
}

// Band data: a header and the band's pixels, row-major.
//
//	offset  size  field
//	0       4     magic "MBND"
//	4       4     first row, big-endian uint32
//	8       4     row count, big-endian uint32
//	12      4     width, big-endian uint32
//	16      rows*width  pixels (palette indices)
const (
	magic      = "MBND"
	headerSize = 16
)

// header describes the rows a band's data holds.
type header struct {
	First, Rows, Width int
}

func (h header) append(b []byte) []byte {
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint32(b, uint32(h.First))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Rows))
	return binary.BigEndian.AppendUint32(b, uint32(h.Width))
}

// parseHeader reads a band header from the first headerSize bytes of b.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("band data of %d bytes is shorter than its %d-byte header", len(b), headerSize)
	}
	if string(b[:4]) != magic {
		return header{}, fmt.Errorf("band data starts with %q, not %q", b[:4], magic)
	}
	h := header{
		First: int(binary.BigEndian.Uint32(b[4:])),
		Rows:  int(binary.BigEndian.Uint32(b[8:])),
		Width: int(binary.BigEndian.Uint32(b[12:])),
	}
	if h.First >= MaxSide || h.Rows < 1 || h.Rows > MaxSide || h.Width < 1 || h.Width > MaxSide {
		return header{}, fmt.Errorf("band header out of range: first row %d, %d rows, width %d", h.First, h.Rows, h.Width)
	}
	return h, nil
}

// renderBand renders band b of p: header and pixels. It checks ctx before
// every row and calls progress at most about ten times.
func renderBand(ctx context.Context, p *Params, b int, progress func(done float64)) ([]byte, error) {
	first, end := p.Rows(b)
	rows := end - first
	out := header{First: first, Rows: rows, Width: p.Width}.append(make([]byte, 0, headerSize+rows*p.Width))
	out = out[:headerSize+rows*p.Width]
	every := max(1, (rows+9)/10)
	for i := range rows {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		off := headerSize + i*p.Width
		renderRow(out[off:off+p.Width], p, first+i)
		if done := i + 1; done%every == 0 || done == rows {
			progress(float64(done) / float64(rows))
		}
	}
	return out, nil
}

// Task is the plugin: a band per task, the PNG in the reduce step.
type Task struct{}

var (
	_ sdk.Task      = Task{}
	_ sdk.Reducer   = Task{}
	_ sdk.Describer = Task{}
)

// Describe names the plugin; its output is the same on every GOARCH.
func (Task) Describe() sdk.Info {
	return sdk.Info{Name: "mandelbrot", Version: "1.0.0", Portable: true}
}

// Run renders the band named by the task's "band" param.
func (Task) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var band struct {
		Band *int `json:"band"`
	}
	if err := req.Decode(&band); err != nil {
		return nil, err
	}
	p, err := decodeParams(req.Decode)
	if err != nil {
		return nil, err
	}
	b := 0
	switch {
	case band.Band != nil:
		b = *band.Band
	case p.Bands > 1:
		return nil, fmt.Errorf("mandelbrot: the image has %d bands: the task needs a band param", p.Bands)
	}
	if b < 0 || b >= p.Bands {
		return nil, fmt.Errorf("mandelbrot: band %d is not in [0, %d)", b, p.Bands)
	}
	data, err := renderBand(ctx, &p, b, func(done float64) {
		// Progress is advisory: a failed report must not fail the band.
		_ = host.Progress(ctx, done, "")
	})
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Data: data}, nil
}
