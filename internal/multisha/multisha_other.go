//go:build !amd64 || purego

package multisha

const accelerated = false

func block16(*[8][16]uint32, *[16]*byte, int) { panic("multisha: no kernel on this platform") }
