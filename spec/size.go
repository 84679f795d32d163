package spec

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// sizeUnits are the units a size accepts: SI units are powers of 1000,
// IEC units powers of 1024. Units are case-sensitive; "K", "M", "G", "mb"
// are rejected as ambiguous.
var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}

var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?) ?([A-Za-z]*)$`)

// Errors of ParseSize.
var (
	// ErrSizeSyntax: not a number with one of the units.
	ErrSizeSyntax = errors.New("want a number of bytes with an optional unit: B, kB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024)")
	// ErrSizeRange: the size does not fit in 64 bits.
	ErrSizeRange = errors.New("size does not fit in 64 bits")
)

// ParseSize reads a size the way a spec's resources.memory and every
// size flag of the CLI do: a decimal number of bytes, optionally with a
// fraction, a space and a unit ("512MiB", "1.5GiB", "2 GB", "4096"). kB,
// KB, MB, GB and TB are powers of 1000; KiB, MiB, GiB, TiB (or Ki, Mi,
// Gi, Ti) powers of 1024. Fractions of a byte are cut off. Zero is a
// valid size; callers that need at least a byte say so.
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	unit, ok := int64(0), false
	if m != nil {
		unit, ok = sizeUnits[m[2]]
	}
	if !ok {
		return 0, fmt.Errorf("size %q: %w", s, ErrSizeSyntax)
	}
	r, _ := new(big.Rat).SetString(m[1])
	r.Mul(r, new(big.Rat).SetInt64(unit))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("size %q: %w", s, ErrSizeRange)
	}
	return n.Int64(), nil
}
