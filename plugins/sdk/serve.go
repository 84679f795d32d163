package sdk

import (
	"log/slog"
	"os"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// Serve runs t as a p2pc task plugin. Call it from main; it returns only
// when the host is done with the plugin. Started by hand (not by a p2pc
// host), it prints a short explanation and exits with status 1.
//
// Plugins must not write to stdout: go-plugin's handshake travels there.
// Log with Logger (JSON lines on stderr, which the host routes into its
// own log).
func Serve(t Task) {
	if os.Getenv(pluginpb.Handshake.MagicCookieKey) != pluginpb.Handshake.MagicCookieValue {
		os.Stderr.WriteString("This is a p2pc task plugin: it is started by p2pc, not by hand.\n" +
			"Name it as `plugin:` in a job spec and run `p2pc run job.yaml`.\n")
		os.Exit(1)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginpb.Handshake,
		Plugins:         plugin.PluginSet{pluginpb.PluginName: &taskPlugin{impl: t}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Output:     os.Stderr,
			Level:      hclog.Warn,
			JSONFormat: true,
		}),
	})
}

// stderr is the process's standard error as it was at start. go-plugin's
// Serve swaps os.Stderr for a pipe to its stdio stream, which a host
// discards unless it asks for it; the real stderr is what the host reads
// and logs line by line.
var stderr = os.Stderr

// hclogTime is the only timestamp layout go-plugin's host accepts in a
// JSON log line; with any other the whole line is logged raw at debug.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// Logger returns a logger for task code: JSON lines on stderr in the form
// the host understands, so plugin logs show up in the node's log with
// their level.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				a.Key = "@timestamp"
				if a.Value.Kind() == slog.KindTime {
					a.Value = slog.StringValue(a.Value.Time().Format(hclogTime))
				}
			case slog.LevelKey:
				a.Key = "@level"
				a.Value = slog.StringValue(hclogLevel(a.Value.Any()))
			case slog.MessageKey:
				a.Key = "@message"
			}
			return a
		},
	}))
}

func hclogLevel(v any) string {
	l, ok := v.(slog.Level)
	if !ok {
		return "info"
	}
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	default:
		return "debug"
	}
}
