//go:build !purego

package multisha

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

// block16 runs SHA-256's compression function over n 64-byte steps of 16
// messages at once: lane l of dig[j] is word j of message l's state, and
// message l's next bytes are at ptrs[l] (advanced by 64 each step).
//
//go:noescape
func block16(dig *[8][16]uint32, ptrs *[16]*byte, n int)

// accelerated: AVX-512 Foundation (VPRORD, VPTERNLOGD, the shuffles) and
// Byte and Word (the 512-bit VPSHUFB), with the OS saving the registers.
var accelerated = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
