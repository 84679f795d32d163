// Command mandelbrot is the p2pc plugin of the Mandelbrot farm, the demo
// and benchmark job of the seed paper (Preon): each task renders a band of
// rows of one image, and the reduce step assembles the bands into a PNG.
//
// Invariants: a pixel depends only on its indices and the job params,
// never on the band split, and every floating-point product is rounded
// explicitly, so no fused multiply-add changes it on any architecture.
// The plugin is therefore Portable: replicas agree byte for byte, and the
// PNG is byte-identical however the image was split.
//
// docs/plugins/mandelbrot.md gives the params, the pixel mapping and the
// task output format.
package main
