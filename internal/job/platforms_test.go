package job

import (
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/spec"
)

func TestPlatformRefusal(t *testing.T) {
	for _, c := range []struct {
		res          spec.Resources
		goos, goarch string
		want         string
	}{
		{spec.Resources{}, "linux", "arm64", ""},
		{spec.Resources{CPUs: 64, GPUs: 1}, "linux", "arm64", ""}, // the peer's own check
		{spec.Resources{OS: "linux"}, "linux", "arm64", ""},
		{spec.Resources{OS: "linux", Arch: "amd64"}, "linux", "amd64", ""},
		{spec.Resources{OS: "linux"}, "windows", "amd64", "the job's resources.os is linux, this peer is windows"},
		{spec.Resources{Arch: "arm64"}, "linux", "amd64", "the job's resources.arch is arm64, this peer is amd64"},
		{spec.Resources{OS: "darwin", Arch: "arm64"}, "linux", "amd64", "the job's resources.os is darwin, this peer is linux"},
	} {
		if got := platformRefusal(c.res, c.goos, c.goarch); got != c.want {
			t.Errorf("%+v on %s/%s: %q, want %q", c.res, c.goos, c.goarch, got, c.want)
		}
	}
}

func TestPluginID(t *testing.T) {
	d := func(b byte) digest.ID { return digest.ID{b} }
	amd := &pluginbuild.Plugin{Digest: d(1), SourceKey: "src", OS: "linux", Arch: "amd64"}
	arm := &pluginbuild.Plugin{Digest: d(2), SourceKey: "src", OS: "linux", Arch: "arm64"}
	if pluginID(amd, nil) != pluginID(arm, nil) {
		t.Error("two platforms' builds of one source have different IDs")
	}
	if pluginID(amd, nil) == amd.Digest {
		t.Error("a built plugin's ID is its binary's digest")
	}
	exe := &pluginbuild.Plugin{Digest: d(3)}
	if pluginID(exe, nil) != exe.Digest {
		t.Error("an executable's ID is not its digest")
	}
	m1 := map[string]*pluginbuild.Plugin{"linux/amd64": exe, "linux/arm64": {Digest: d(4)}}
	m2 := map[string]*pluginbuild.Plugin{"linux/amd64": exe, "linux/arm64": {Digest: d(5)}}
	if a, b := pluginID(exe, m1), pluginID(exe, m2); a == b || a == exe.Digest {
		t.Error("a per-platform map's ID does not cover every entry")
	}
}
