// Command mandelbrot is the p2pc plugin of the Mandelbrot farm, the demo
// and benchmark job of the seed paper (Preon): each task renders a band of
// rows of one image, and the reduce step assembles the bands into a PNG.
//
// Job params (every key optional; defaults in brackets):
//
//	width, height   int    image size in pixels [1920, 1440]
//	max_iter        int    iterations before a point counts as inside
//	                       the set [2000]
//	x_min, x_max    float  real part of the region [-2.5, 1.0]
//	y_min, y_max    float  imaginary part of the region [-1.3125, 1.3125]
//	                       (square pixels at any 4:3 size)
//	bands           int    number of bands the image is split into, from 1
//	                       to height [64]
//
// Task param:
//
//	band            int    which band, 0 to bands-1 (may be left out
//	                       when bands is 1)
//
// Band b covers rows [b*height/bands, (b+1)*height/bands) in integer
// arithmetic, so any number of bands tiles the image exactly. Row 0 is
// the top (y_max); pixel (x, y) samples the point at its centre,
//
//	cx = x_min + (x + 0.5) * ((x_max - x_min) / width)
//	cy = y_max - (y + 0.5) * ((y_max - y_min) / height)
//
// and its value is 0 if z = z*z + c (from z = 0) stays within |z| <= 2
// for max_iter iterations, else 1 + (escape iteration mod 255): an index
// into a fixed 256-colour palette (no smooth colouring). A pixel depends
// only on its indices and the job params, never on the band split.
//
// Determinism across architectures: every floating-point product in the
// iteration and the pixel mapping is wrapped in an explicit float64()
// conversion. The Go spec allows compilers to fuse x*y + z into one
// fused multiply-add (arm64, ppc64le, s390x, riscv64 and amd64 with
// GOAMD64=v3 do), which rounds once instead of twice and changes some
// escape counts; an explicit conversion forces the rounding and forbids
// the fusion. TestGoldenPixels pins the pixels of a small render, and
// without the conversions it fails under GOAMD64=v3. So Describe says
// Portable: replicas on peers of any GOARCH must agree byte for byte.
//
// Task output (the task's inline data, stored as the file "data"):
//
//	offset  size        field
//	0       4           magic "MBND"
//	4       4           first row, big-endian uint32
//	8       4           row count, big-endian uint32
//	12      4           width, big-endian uint32
//	16      rows*width  pixel values, row-major
//
// Reduce reads every task's data header, checks that the bands have the
// image's width and cover its rows exactly once (no gap, no overlap, in
// any order), and writes mandelbrot.png: a paletted PNG from Go's
// encoder, which is deterministic, so the file is byte-identical however
// the image was split.
//
// Demo cost (amd64, 2 cores): the defaults take 3.0 CPU-seconds to
// render; `p2pc run examples/mandelbrot.yaml` (64 bands, two local slots)
// finishes in 2.2 s at best, 4.7 s at worst on a busy machine (3.6
// CPU-seconds in all). 1024x768 with max_iter 1000 would take under half
// a CPU-second: over before one could watch it.
package main
