package job

import (
	"runtime"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/spec"
)

func TestLocalMisfit(t *testing.T) {
	for _, tt := range []struct {
		r    spec.Resources
		want string
	}{
		{spec.Resources{}, ""},
		{spec.Resources{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: 1, Memory: 1 << 30}, ""},
		{spec.Resources{OS: "plan9"}, "resources.os is plan9"},
		{spec.Resources{Arch: "mips"}, "resources.arch is mips"},
		{spec.Resources{CPUs: float64(runtime.NumCPU()) + 1}, "CPUs (resources.cpus)"},
	} {
		got := localMisfit(tt.r)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("localMisfit(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}
