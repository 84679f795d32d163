package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/spec"
)

// CheckOptions are CheckPlugin's.
type CheckOptions struct {
	// CacheDir holds built plugins and their remembered Describe answers
	// (PrepareOptions.CacheDir).
	CacheDir string
	// TaskUser is the account the plugin runs as (RunOptions.TaskUser).
	TaskUser *sandbox.User
	Logger   *slog.Logger
}

// CheckPlugin checks the job's plugin as a run would before its first
// task: it resolves it (building a Go package folder), starts it confined
// and asks it what it is (go-plugin's handshake checks the magic cookie
// and the protocol version), and checks that it has the reduce step the
// spec asks for. An executable whose Describe answer an earlier run or
// check remembered (its digest pins its bytes) is not started again.
// Every error satisfies errors.Is(err, ErrBadInput) and names the plugin
// value's place in the spec (job.yaml:2:9: plugin "./p": ...), unless ctx
// ended.
func CheckPlugin(ctx context.Context, js *spec.Job, opts CheckOptions) (pluginproto.PluginInfo, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if _, err := resolveBuilds(ctx, js, opts.CacheDir, log); err != nil {
		return pluginproto.PluginInfo{}, err
	}
	plug, err := pluginbuild.Resolve(ctx, js.PluginPath, opts.CacheDir, log)
	if err != nil {
		return pluginproto.PluginInfo{}, pluginErr(ctx, js, err)
	}
	p := &Prepared{Spec: js, Plugin: plug, cacheDir: opts.CacheDir}
	info, known := p.recallInfo()
	if !known {
		pool := pluginhost.NewPool(pluginhost.Config{
			Path:     plug.Path,
			Checksum: plug.Digest,
			Verified: plug.Identity,
			Logger:   log,
			Sandbox:  sandbox.Policy{Network: js.Sandbox.Network, User: opts.TaskUser},
			Limits:   sandbox.Limits{Memory: js.Resources.Memory},
		}, 1)
		defer pool.Close()
		if info, err = describePlugin(ctx, pool, p, log); err != nil {
			return info, pluginErr(ctx, js, err)
		}
	}
	if js.Reduce && !info.Reduce {
		return info, pluginErr(ctx, js, errNoReduce)
	}
	return info, nil
}

// describePlugin asks pool's plugin what it is and remembers the answer
// under the executable's digest.
func describePlugin(ctx context.Context, pool *pluginhost.Pool, p *Prepared, log *slog.Logger) (pluginproto.PluginInfo, error) {
	info, err := pool.Describe(ctx)
	if err == nil {
		if err := pluginbuild.RememberInfo(p.cacheDir, infoMemo, p.Plugin.Digest, info); err != nil {
			log.Debug("plugin info not remembered", "err", err)
		}
	}
	return info, err
}

// pluginErr is the error of a job whose plugin failed its check with err,
// at the plugin value's place in the spec (ErrBadInput), or ctx's error.
func pluginErr(ctx context.Context, js *spec.Job, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, errNoReduce):
		return bad(fmt.Errorf("%s:%s: the spec asks for reduce, but plugin %q has no reduce step", js.File, js.PluginPos, js.Plugin))
	}
	return bad(fmt.Errorf("%s:%s: plugin %q: %w", js.File, js.PluginPos, js.Plugin, err))
}
