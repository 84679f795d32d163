package job

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/spec"
	"google.golang.org/protobuf/proto"
)

// A job runs on every platform (GOOS/GOARCH) it has a plugin for: this
// machine's always; with a Go package folder, every platform a peer
// enrols with (cross-built on first demand, cached by content); with a
// per-platform plugin map, the platforms it lists. Each peer receives its
// own platform's executable; a peer whose platform has none, or that the
// spec's resources.os/arch exclude, gets no task, and the report says why.

// pluginID is what the job ID and the tasks' keys take of the plugin: for
// a Go package folder its source key (the same for every platform's
// build), for a per-platform map every platform's digest, else the
// executable's digest.
func pluginID(plug *pluginbuild.Plugin, builds map[string]*pluginbuild.Plugin) digest.ID {
	switch {
	case plug.SourceKey != "":
		return sha256.Sum256([]byte("p2pc-plugin-source " + plug.SourceKey))
	case len(builds) > 0:
		h := sha256.New()
		for _, plat := range spec.Platforms { // in a fixed order
			if b := builds[plat]; b != nil {
				fmt.Fprintf(h, "%s %s\n", plat, b.Digest)
			}
		}
		var id digest.ID
		h.Sum(id[:0])
		return id
	}
	return plug.Digest
}

// resolveBuilds resolves every executable of a per-platform plugin map
// (nil for a single plugin). This machine's platform must be in it: the
// submitter runs the plugin too (Describe, its own slots, reduce).
func resolveBuilds(ctx context.Context, job *spec.Job, cacheDir string, log *slog.Logger) (map[string]*pluginbuild.Plugin, error) {
	if len(job.PluginBuilds) == 0 {
		return nil, nil
	}
	if job.PluginPath == "" {
		var have []string
		for _, b := range job.PluginBuilds {
			have = append(have, b.Platform)
		}
		return nil, bad(fmt.Errorf("%s:%s: plugin: the per-platform map (%s) has no entry for this machine's platform %s, which runs the plugin too (Describe, local slots, reduce)",
			job.File, job.PluginPos, strings.Join(have, ", "), spec.HostPlatform()))
	}
	builds := map[string]*pluginbuild.Plugin{}
	for _, b := range job.PluginBuilds {
		p, err := pluginbuild.Resolve(ctx, b.Path, cacheDir, log)
		if err == nil && p.Built {
			err = errors.New("a per-platform map lists executables, not Go package folders (give the folder alone: p2pc builds it for every platform)")
		}
		if err != nil {
			return nil, bad(fmt.Errorf("%s:%s: plugin %s %q: %w", job.File, b.Pos, b.Platform, b.Plugin, err))
		}
		p.OS, p.Arch, _ = strings.Cut(b.Platform, "/")
		builds[b.Platform] = p
	}
	return builds, nil
}

// platformRefusal says why a peer of goos/goarch gets no task of a job
// that needs res ("" if it may take part): spec.Resources.Admit on the
// platform alone (the peer checks the rest of its offer itself).
func platformRefusal(res spec.Resources, goos, goarch string) string {
	offer := spec.Resources{OS: goos, Arch: goarch}
	if ok, m := offer.Admit(spec.Resources{OS: res.OS, Arch: res.Arch}); !ok {
		return m.Reason("this peer", "")
	}
	return ""
}

// platformHellos are the job's hellos for the platforms other than this
// machine's, made on a peer's first demand (one build and publish a
// platform, whoever asks).
type platformHellos struct {
	mu sync.Mutex
	m  map[string]*platformHello
}

type platformHello struct {
	done  chan struct{} // closed when hello or err is set
	hello *peerpb.Hello
	err   error // why the platform's peers get no task
}

// errNoBinary wraps the reasons a platform has no plugin executable.
var errNoBinary = errors.New("no plugin executable for its platform")

// helloFor returns the hello for the peer client talks to: the published
// one, or its own platform's (Info says which). A peer the job has no
// executable for, or that resources.os/arch exclude, is refused, and the
// report says why (peerpb.RefusedError, recorded once per peer).
func (s *Session) helloFor(ctx context.Context, name string, client peerpb.PeerClient) (*peerpb.Hello, error) {
	published, err := s.publish(ctx)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	info, err := client.Info(ictx, &peerpb.InfoRequest{Proto: peerpb.ProtocolVersion})
	cancel()
	if err != nil || info.GetOs() == "" || info.GetArch() == "" {
		// It does not say: it refuses the job itself if it cannot run it.
		return published, nil
	}
	goos, goarch := info.GetOs(), info.GetArch()
	plat := goos + "/" + goarch
	why := platformRefusal(s.r.p.Spec.Resources, goos, goarch)
	hello := published
	if why == "" && plat != spec.HostPlatform() {
		hello, err = s.platformHello(ctx, goos, goarch)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errNoBinary):
			why = oneLine(err)
		case err != nil: // publishing failed: the session fails, and is tried again
			return nil, fmt.Errorf("enrol %s: %w", name, err)
		}
	}
	if why != "" {
		refusal := &peerpb.RefusedError{Reason: fmt.Sprintf("peer %s (%s) gets no task: %s", name, plat, why)}
		s.noTask(name, refusal.Reason)
		s.q.Refused(name, refusal.Reason)
		return nil, fmt.Errorf("enrol %s: %w", name, refusal)
	}
	return hello, nil
}

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// platformHello returns the hello for goos/goarch, building and
// publishing its executable on the first demand.
func (s *Session) platformHello(ctx context.Context, goos, goarch string) (*peerpb.Hello, error) {
	plat := goos + "/" + goarch
	s.plats.mu.Lock()
	if s.plats.m == nil {
		s.plats.m = map[string]*platformHello{}
	}
	ph := s.plats.m[plat]
	if ph == nil {
		ph = &platformHello{done: make(chan struct{})}
		s.plats.m[plat] = ph
		// Built in the run's context, not the asking peer's: the next
		// peer of the platform takes the same answer.
		bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			select {
			case <-s.runDone:
				stop()
			case <-ph.done:
			}
		}()
		go func() {
			defer stop()
			ph.hello, ph.err = s.makePlatformHello(bctx, goos, goarch)
			if ph.err != nil && !errors.Is(ph.err, errNoBinary) {
				// Not the platform's fault (publishing, the run ending):
				// the next peer tries again.
				s.plats.mu.Lock()
				delete(s.plats.m, plat)
				s.plats.mu.Unlock()
			}
			close(ph.done)
		}()
	}
	s.plats.mu.Unlock()
	select {
	case <-ph.done:
		return ph.hello, ph.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// makePlatformHello finds or builds the executable for goos/goarch, puts
// it into the block store, and returns the published hello naming it.
func (s *Session) makePlatformHello(ctx context.Context, goos, goarch string) (*peerpb.Hello, error) {
	r := s.r
	plat := goos + "/" + goarch
	var plug *pluginbuild.Plugin
	switch {
	case len(r.p.Builds) > 0:
		if plug = r.p.Builds[plat]; plug == nil {
			return nil, fmt.Errorf("%w: the spec's per-platform plugin map has no %s entry", errNoBinary, plat)
		}
	case r.p.Plugin.Source != "":
		start := time.Now()
		var err error
		if plug, err = pluginbuild.Build(ctx, r.p.Plugin.Source, r.p.cacheDir, goos, goarch, r.log); err != nil {
			r.log.Warn("cross-build failed: the platform's peers get no task", "platform", plat, "err", err)
			return nil, fmt.Errorf("%w: cross-build failed: %w", errNoBinary, err)
		}
		r.log.Info("plugin built for a peer's platform", "platform", plat, "took", time.Since(start).Round(time.Millisecond))
	default:
		return nil, fmt.Errorf("%w: the plugin is an executable for %s (list one per platform: plugin: {%s: ..., %s: ...}, or give a Go package folder)",
			errNoBinary, spec.HostPlatform(), spec.HostPlatform(), plat)
	}
	published, err := s.publish(ctx)
	if err != nil {
		return nil, err
	}
	f := jobFile{name: "plugin", path: plug.Path, digest: plug.Digest}
	m, id, err := r.putFile(ctx, r.opts.Remote.Store, f, true)
	if err != nil {
		return nil, r.storeFault(r.opts.Remote.Store, fmt.Errorf("publish the %s plugin: %w", plat, err))
	}
	h := proto.Clone(published).(*peerpb.Hello)
	h.Plugin = &peerpb.FileRef{Name: f.name, FileId: id[:], Size: m.Size, Digest: f.digest[:]}
	h.PluginOs, h.PluginArch = goos, goarch
	return h, nil
}

// noTask records, once per peer, why it gets no task (report warnings).
func (s *Session) noTask(peer, reason string) {
	if !s.ids.first("no-task " + peer) {
		return
	}
	r := s.r
	r.log.Warn("peer gets no task", "peer", peer, "reason", reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Warnings = append(r.rep.Warnings, reason)
	r.dirty = true
	r.wake()
}
