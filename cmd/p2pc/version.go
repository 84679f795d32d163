package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// version is set with -ldflags "-X main.version=..." for releases.
var version = "dev"

// VersionCmd is `p2pc version`.
type VersionCmd struct{}

// Run prints the version, the commit and the protocol versions.
func (VersionCmd) Run(*Globals) error {
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	fmt.Printf("p2pc %s (commit %s, %s, %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("plugin protocol %d.%d\n", pluginpb.ProtocolVersion, pluginpb.SDKProtocol)
	return nil
}
