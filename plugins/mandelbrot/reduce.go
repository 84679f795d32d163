package main

import (
	"bufio"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// OutputFile is the name of the image the reduce step writes.
const OutputFile = "mandelbrot.png"

// Palette maps pixel values to colours: 0 (inside the set) is black, 1 to
// 255 run through a fixed cycle of blues, white and orange. Built with
// integer arithmetic only, so it is the same everywhere.
var Palette = buildPalette()

func buildPalette() color.Palette {
	// Control points of the cycle, at pixel values 1..256 (256 wraps to 1).
	stops := []struct {
		at      int
		r, g, b int
	}{
		{1, 0, 7, 100},
		{42, 32, 107, 203},
		{108, 237, 255, 255},
		{165, 255, 170, 0},
		{220, 0, 2, 0},
		{256, 0, 7, 100},
	}
	pal := make(color.Palette, 256)
	pal[0] = color.RGBA{0, 0, 0, 255}
	for v := 1; v < 256; v++ {
		i := 0
		for stops[i+1].at <= v {
			i++
		}
		a, b := stops[i], stops[i+1]
		lerp := func(x, y int) uint8 { return uint8(x + (y-x)*(v-a.at)/(b.at-a.at)) }
		pal[v] = color.RGBA{lerp(a.r, b.r), lerp(a.g, b.g), lerp(a.b, b.b), 255}
	}
	return pal
}

// band is one task's data file, as found by the reduce step.
type band struct {
	header
	task string
	path string
}

// Reduce checks that the tasks' bands tile the image exactly and writes
// it as OutputFile.
func (Task) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	p, err := decodeParams(req.Decode)
	if err != nil {
		return nil, err
	}
	bands, err := readBands(req.Tasks)
	if err != nil {
		return nil, err
	}
	if err := checkTiling(&p, bands); err != nil {
		return nil, err
	}
	img := image.NewPaletted(image.Rect(0, 0, p.Width, p.Height), Palette)
	for _, b := range bands {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if err := readPixels(b, img.Pix[b.First*p.Width:(b.First+b.Rows)*p.Width]); err != nil {
			return nil, err
		}
	}
	if err := writePNG(filepath.Join(req.WorkDir, OutputFile), img); err != nil {
		return nil, err
	}
	return &sdk.Result{Files: []string{OutputFile}}, nil
}

// readBands reads the header of every task's data file and checks that
// the file holds exactly the pixels its header announces.
func readBands(tasks []sdk.TaskOutput) ([]band, error) {
	bands := make([]band, 0, len(tasks))
	for _, t := range tasks {
		f, ok := t.File(sdk.DataFile)
		if !ok {
			return nil, fmt.Errorf("mandelbrot: task %s has no band data", t.TaskID)
		}
		h, err := readHeader(f.Path)
		if err != nil {
			return nil, fmt.Errorf("mandelbrot: task %s: %w", t.TaskID, err)
		}
		bands = append(bands, band{header: h, task: t.TaskID, path: f.Path})
	}
	return bands, nil
}

func readHeader(path string) (header, error) {
	f, err := os.Open(path)
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	buf := make([]byte, headerSize)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF {
		return header{}, fmt.Errorf("read band header: %w", err)
	}
	h, err := parseHeader(buf[:n])
	if err != nil {
		return header{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return header{}, err
	}
	if want := int64(headerSize) + int64(h.Rows)*int64(h.Width); fi.Size() != want {
		return header{}, fmt.Errorf("band data is %d bytes, its header (%d rows of %d pixels) says %d", fi.Size(), h.Rows, h.Width, want)
	}
	return h, nil
}

// checkTiling sorts bands by first row and checks that they cover the
// rows of the image exactly once, at the image's width.
func checkTiling(p *Params, bands []band) error {
	sort.SliceStable(bands, func(i, j int) bool { return bands[i].First < bands[j].First })
	next := 0 // first row not covered yet
	for i, b := range bands {
		switch {
		case b.Width != p.Width:
			return fmt.Errorf("mandelbrot: task %s has rows of %d pixels, the image is %d wide", b.task, b.Width, p.Width)
		case b.First < next:
			return fmt.Errorf("mandelbrot: tasks %s and %s overlap at row %d", bands[i-1].task, b.task, b.First)
		case b.First > next:
			return fmt.Errorf("mandelbrot: rows %d to %d are missing (no task covers them)", next, b.First-1)
		}
		next = b.First + b.Rows
	}
	switch {
	case next < p.Height:
		return fmt.Errorf("mandelbrot: rows %d to %d are missing (no task covers them)", next, p.Height-1)
	case next > p.Height:
		return fmt.Errorf("mandelbrot: task %s has rows up to %d, the image is %d high", bands[len(bands)-1].task, next-1, p.Height)
	}
	return nil
}

// readPixels reads the pixels of band b into dst.
func readPixels(b band, dst []byte) error {
	f, err := os.Open(b.path)
	if err != nil {
		return fmt.Errorf("mandelbrot: task %s: %w", b.task, err)
	}
	defer f.Close()
	if _, err := f.ReadAt(dst, headerSize); err != nil {
		return fmt.Errorf("mandelbrot: task %s: read pixels: %w", b.task, err)
	}
	return nil
}

// writePNG encodes img to path. Go's PNG encoder is deterministic for a
// given image and compression level, so the file is the same however the
// image was split into bands.
func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("mandelbrot: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := png.Encoder{CompressionLevel: png.DefaultCompression}
	if err := enc.Encode(w, img); err != nil {
		f.Close()
		return fmt.Errorf("mandelbrot: encode png: %w", err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("mandelbrot: write png: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mandelbrot: write png: %w", err)
	}
	return nil
}
