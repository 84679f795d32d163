package job

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginbuild"
)

// published is the job's hello to peers, made once per run, and the
// publishing of the plugin and the inputs into the block store (read,
// chunked, hashed and written: 50-100 ms for a 19 MB plugin on a loaded
// machine), which startPublish begins when the run starts.
//
// The hello names each file by its manifest's ID, which only cutting and
// hashing the whole file computes. A file's manifest is a function of its
// content, so it is remembered in the cache folder by the file's digest
// (manifestMemo). When every file's manifest is remembered, the hello is
// known at once, and the blocks are only promised to the store
// (blocks.Expectation): they are put the first time a peer asks the store
// for one, and that peer's read waits until they are written. A warm
// swarm, whose peers hold the plugin by its digest and fetch none of it,
// never pays for publishing.
type published struct {
	start sync.Once
	ready chan struct{} // closed once hello or err is set
	done  chan struct{} // closed when the publishing goroutine returned
	hello *peerpb.Hello

	mu  sync.Mutex
	err error // publishing failed (set before ready, or after, on demand)
}

// manifestMemo names the remembered manifests of files cut into blocks of
// blocks.DefaultBlockSize (pluginbuild.RecallInfo), by file digest.
const manifestMemo = "manifest-v1-1m"

// startPublish begins publishing in the background, in ctx; stop ends it
// and waits (the store is the node's, closed after the run). Without a
// remote store there is nothing to publish.
func (r *runner) startPublish(ctx context.Context) (stop func()) {
	ro := r.opts.Remote
	if ro == nil || ro.Store == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	r.pub.start.Do(func() {
		r.pub.ready = make(chan struct{})
		r.pub.done = make(chan struct{})
		go func() {
			defer close(r.pub.done)
			r.runPublish(ctx)
		}()
	})
	return func() {
		cancel()
		<-r.pub.done
	}
}

// runPublish makes the hello and publishes the job's files (published).
func (r *runner) runPublish(ctx context.Context) {
	h, exps := r.recallHello()
	if exps == nil {
		h, err := r.buildHello(ctx)
		r.pub.hello, r.pub.err = h, err
		close(r.pub.ready)
		r.opts.Phase("job published")
		return
	}
	r.pub.hello = h
	close(r.pub.ready)
	r.opts.Phase("job hello recalled (blocks published when a peer asks)")
	var err error
	defer func() {
		for _, e := range exps {
			e.Settle(err) // those not settled yet: the error that ended publishing
		}
	}()
	select {
	case <-exps[0].Wanted(): // shared by all
	case <-ctx.Done():
		err = ctx.Err()
		return
	}
	// File by file, in the hello's order (the plugin first), each
	// settled as soon as it is in the store.
	refs := helloFiles(h)
	for i, f := range r.files() {
		var id blocks.ID
		if _, id, err = r.putFile(ctx, r.opts.Remote.Store, f, false); err != nil {
			err = r.storeFault(r.opts.Remote.Store, fmt.Errorf("publish %s: %w", f.name, err))
		} else if id != blocks.ID(refs[i].FileId) {
			err = fmt.Errorf("publish %s: %w", f.name, errChangedFile)
		}
		if err != nil {
			r.pub.mu.Lock()
			r.pub.err = err
			r.pub.mu.Unlock()
			if ctx.Err() == nil {
				r.log.Warn("publish job blocks; peers that lack them cannot take part", "err", err)
			}
			return
		}
		exps[i].Settle(nil)
	}
	r.opts.Phase("job published")
}

// publish waits for the hello startPublish makes (or ctx). Once publishing
// has failed, it returns the error.
func (r *runner) publish(ctx context.Context) (*peerpb.Hello, error) {
	if r.pub.ready == nil {
		return nil, errors.New("publish the job: no block store to serve it from")
	}
	select {
	case <-r.pub.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.pub.mu.Lock()
	defer r.pub.mu.Unlock()
	if r.pub.err != nil {
		return nil, r.pub.err
	}
	return r.pub.hello, nil
}

// helloBase is the job's hello without its files.
func (r *runner) helloBase() *peerpb.Hello {
	ro := r.opts.Remote
	h := &peerpb.Hello{
		Proto:           peerpb.ProtocolVersion,
		JobId:           r.p.ID.String(),
		JobName:         r.p.Spec.Name,
		Coordinator:     r.opts.Node,
		CoordinatorAddr: ro.Addr,
		TimeoutMs:       r.p.Spec.Timeout.Milliseconds(),
		Network:         r.p.Spec.Sandbox.Network,
		Resources:       peerpb.ResourcesOf(r.p.Spec.Resources),
		Acks:            true,
		Epoch:           r.opts.Epoch,
	}
	h.PluginOs, h.PluginArch = pluginPlatform()
	h.OwnInputs = uint32(len(r.ownFiles().files))
	return h
}

// jobFile is a file the hello names: the plugin or an input.
type jobFile struct {
	name, path string
	digest     digest.ID
}

// files lists the job's files in the hello's order.
func (r *runner) files() []jobFile {
	fs := []jobFile{{"plugin", r.p.Plugin.Path, r.p.Plugin.Digest}}
	for _, in := range r.p.Inputs {
		fs = append(fs, jobFile{in.Name, in.Path, in.Digest})
	}
	return append(fs, r.ownFiles().files...)
}

// withFiles completes h with refs, the plugin's first.
func withFiles(h *peerpb.Hello, refs []*peerpb.FileRef) *peerpb.Hello {
	h.Plugin, h.Inputs = refs[0], refs[1:]
	return h
}

// helloFiles lists the files h names, in the order of runner.files.
func helloFiles(h *peerpb.Hello) []*peerpb.FileRef {
	return append([]*peerpb.FileRef{h.Plugin}, h.Inputs...)
}

// buildHello puts the plugin and the inputs into the block store and
// returns the hello that names them. It remembers the manifest of each
// file whose content was the one its digest names.
func (r *runner) buildHello(ctx context.Context) (*peerpb.Hello, error) {
	ro := r.opts.Remote
	var refs []*peerpb.FileRef
	for _, f := range r.files() {
		m, id, err := r.putFile(ctx, ro.Store, f, true)
		if err != nil {
			return nil, r.storeFault(ro.Store, fmt.Errorf("publish %s: %w", f.name, err))
		}
		refs = append(refs, &peerpb.FileRef{Name: f.name, FileId: id[:], Size: m.Size, Digest: f.digest[:]})
	}
	return withFiles(r.helloBase(), refs), nil
}

// putFile puts f into s (blocks.PutFile); with remember, it hashes the
// whole content on the way and, if that is f's digest, remembers the
// manifest under it.
func (r *runner) putFile(ctx context.Context, s blocks.Store, f jobFile, remember bool) (*blocks.Manifest, blocks.ID, error) {
	remember = remember && r.p.cacheDir != ""
	file, err := os.Open(f.path)
	if err != nil {
		return nil, blocks.ID{}, err
	}
	defer file.Close()
	var in io.Reader = file
	var sum hash.Hash
	if remember {
		sum = sha256.New()
		in = io.TeeReader(file, sum)
	}
	m, id, err := blocks.PutFile(ctx, s, in, blocks.DefaultBlockSize)
	if err != nil {
		return nil, blocks.ID{}, fmt.Errorf("%s: %w", f.path, err)
	}
	if remember && digest.ID(sum.Sum(nil)) == f.digest {
		if err := pluginbuild.RememberInfo(r.p.cacheDir, manifestMemo, f.digest, m.Encode()); err != nil {
			r.log.Debug("remember manifest", "file", f.name, "err", err)
		}
	}
	return m, id, nil
}

// recallHello makes the hello from the remembered manifests of the job's
// files, and promises each file's blocks to the store (one expectation a
// file, in the order of runner.files). It returns no expectations when a
// manifest is not remembered, a file's size is not the manifest's, or the
// store cannot promise blocks.
func (r *runner) recallHello() (*peerpb.Hello, []*blocks.Expectation) {
	st, ok := r.opts.Remote.Store.(interface {
		Expect([]blocks.ID) *blocks.Expectation
	})
	if !ok || r.p.cacheDir == "" {
		return nil, nil
	}
	var (
		refs []*peerpb.FileRef
		ids  [][]blocks.ID
	)
	for _, f := range r.files() {
		var enc []byte
		if !pluginbuild.RecallInfo(r.p.cacheDir, manifestMemo, f.digest, &enc) {
			return nil, nil
		}
		m, err := blocks.DecodeManifest(enc)
		if err != nil || m.BlockSize != blocks.DefaultBlockSize {
			return nil, nil
		}
		if fi, err := os.Stat(f.path); err != nil || fi.Size() != m.Size {
			return nil, nil
		}
		id := blocks.Sum(enc)
		ids = append(ids, append([]blocks.ID{id}, m.Blocks...))
		refs = append(refs, &peerpb.FileRef{Name: f.name, FileId: id[:], Size: m.Size, Digest: f.digest[:]})
	}
	exps := []*blocks.Expectation{st.Expect(ids[0])}
	for _, more := range ids[1:] {
		exps = append(exps, exps[0].Also(more))
	}
	return withFiles(r.helloBase(), refs), exps
}

// errChangedFile: a job file's content is no longer the one its digest
// (taken when the run began) names.
var errChangedFile = errors.New("the file changed since the run began")
