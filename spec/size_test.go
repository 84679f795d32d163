package spec

import (
	"errors"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"4096", 4096, nil},
		{"512B", 512, nil},
		{"1kB", 1000, nil},
		{"1KB", 1000, nil},
		{"2GB", 2e9, nil}, // a spec's and the CLI's GB alike: 10^9
		{"1.5GiB", 3 << 29, nil},
		{"64KiB", 64 << 10, nil},
		{"1Mi", 1 << 20, nil},
		{"2 TiB", 2 << 40, nil},
		{" 10MB ", 10e6, nil},
		{"1.0000001B", 1, nil}, // fractions of a byte are cut off
		{"8EiB", 0, ErrSizeSyntax},
		{"9000000TiB", 0, ErrSizeRange},
		{"64K", 0, ErrSizeSyntax}, // ambiguous
		{"1mb", 0, ErrSizeSyntax},
		{"1G", 0, ErrSizeSyntax},
		{"-1", 0, ErrSizeSyntax},
		{"1e9", 0, ErrSizeSyntax},
		{"", 0, ErrSizeSyntax},
		{"MiB", 0, ErrSizeSyntax},
	} {
		got, err := ParseSize(c.in)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "1.5GiB", "2 GB", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}
