package benchmarks

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// echoPlugin builds plugins/echo (cached per benchmark process).
func echoPlugin(b *testing.B) *pluginbuild.Plugin {
	b.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	cache := filepath.Join(os.TempDir(), "p2pc-bench-plugins")
	p, err := pluginbuild.Resolve(context.Background(), filepath.Join(root, "plugins", "echo"), cache, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

var echoReq = &sdk.Request{JobID: "bench", TaskID: "t", Params: []byte(`{"n":1}`)}

// BenchmarkEchoWarmPool is one warm echo task round trip through the
// plugin host's pool: acquire a warm process, call Run, release.
func BenchmarkEchoWarmPool(b *testing.B) {
	p := echoPlugin(b)
	pool := pluginhost.NewPool(pluginhost.Config{Path: p.Path, Checksum: p.Digest}, 1)
	defer pool.Close()
	ctx := context.Background()
	if _, err := pool.Run(ctx, echoReq, nil, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := pool.Run(ctx, echoReq, nil, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEchoBareGRPC is the same call straight through the SDK's gRPC
// client to a plugin process started by go-plugin: the floor the pool is
// compared against.
func BenchmarkEchoBareGRPC(b *testing.B) {
	p := echoPlugin(b)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginpb.Handshake,
		Plugins:          plugin.PluginSet{pluginpb.PluginName: &pluginproto.Plugin{}},
		Cmd:              exec.Command(p.Path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	defer client.Kill()
	rpc, err := client.Client()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := rpc.Dispense(pluginpb.PluginName)
	if err != nil {
		b.Fatal(err)
	}
	task := raw.(*pluginproto.Client)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := task.Run(ctx, echoReq, nil); err != nil {
			b.Fatal(err)
		}
	}
}
