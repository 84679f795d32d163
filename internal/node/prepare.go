package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// prepare fetches the plugin and the inputs and checks the plugin digest.
func (s *session) prepare(ctx context.Context) error {
	n := s.n
	h := s.hello
	var digest [32]byte
	copy(digest[:], h.Plugin.Digest)
	pluginPath := filepath.Join(n.cfg.DataDir, "plugins", hex.EncodeToString(digest[:]), "plugin")
	var err error
	if s.job, err = n.openJob(h.JobId); err != nil {
		return err
	}
	// The pool checks the file against the digest once per file identity:
	// a second job with the same plugin costs a stat, not a hash.
	if s.gpu {
		s.gpuPools = make([]*pluginhost.Pool, len(n.cfg.GPUs.Devices))
		for i := range s.gpuPools {
			s.gpuPools[i] = n.pool(s.job, digest, pluginPath, h.Network, h.Resources.GetMemory(), i)
		}
		s.pool = s.gpuPools[0]
	} else {
		s.pool = n.pool(s.job, digest, pluginPath, h.Network, h.Resources.GetMemory(), -1)
	}
	if err := s.fetchPlugin(ctx, pluginPath); err != nil {
		return err
	}

	// A copy made for an earlier session of this job is used again only
	// if no task can have changed it.
	reuse := n.inputsImmutable()
	shared := len(h.Inputs) - int(h.OwnInputs)
	for i, in := range h.Inputs {
		path := filepath.Join(s.job.dir, "inputs", filepath.FromSlash(in.Name))
		_, statErr := os.Stat(path)
		if i >= shared { // fetched for the first lease that names it (owninputs.go)
			s.own = append(s.own, &ownInput{ref: in, file: sdk.File{Name: in.Name, Path: path}, ready: statErr == nil && reuse})
			continue
		}
		if statErr != nil || !reuse {
			if err := s.fetchFile(ctx, in, path, 0o444); err != nil {
				return fmt.Errorf("input: %w", err)
			}
		}
		s.inputs = append(s.inputs, sdk.File{Name: in.Name, Path: path})
	}
	return nil
}

// fetchFile fetches the blocks of ref that the store lacks and exports
// the file to path. A block that rotted in the store fails the export's
// check: then every block of the file is read (so that each rotten one is
// quarantined), the missing ones are fetched again from the holders (the
// submitter at least), and the export is tried once more.
func (s *session) fetchFile(ctx context.Context, ref *peerpb.FileRef, path string, mode os.FileMode) error {
	n, h := s.n, s.hello
	holders := append([]string{h.CoordinatorAddr}, h.Holders...)
	id, err := blocks.IDFromBytes(ref.FileId)
	if err != nil {
		return err
	}
	if err := n.store.Pin("job-"+h.JobId, id); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f := transfer.NewFetcher(n.store, n.conns, transfer.FetchOptions{Logger: n.cfg.Logger, GiveUp: 20 * time.Second})
	for try := 0; ; try++ {
		if _, err := f.Fetch(ctx, id, holders, nil); err != nil {
			return fmt.Errorf("fetch %s: %w", ref.Name, n.storeFull(err))
		}
		err := blocks.ExportFileMode(ctx, n.store, id, path, mode)
		if err == nil {
			return nil
		}
		if try > 0 || !errors.Is(err, blocks.ErrCorrupt) {
			return fmt.Errorf("export %s: %w", ref.Name, err)
		}
		rotten := quarantineRotten(ctx, n.store, id)
		s.log.Warn("corrupt blocks in the store, quarantined; fetching them again", "file", ref.Name, "rotten", rotten, "err", err)
	}
}

// quarantineRotten reads every block of file (Get verifies each and
// quarantines one that no longer matches its ID) and returns how many
// failed: afterwards the store lacks them, and a fetch gets them again.
func quarantineRotten(ctx context.Context, st blocks.Store, file blocks.ID) int {
	m, err := blocks.ReadManifest(ctx, st, file)
	if err != nil {
		return 1 // the manifest itself: now quarantined or missing
	}
	n := 0
	for _, id := range m.Blocks {
		if _, err := st.Get(ctx, id); err != nil {
			n++
		}
	}
	return n
}

// cleanup closes the job's plugin processes and removes its folders
// when no other session of the job is left.
func (s *session) cleanup() {
	if s.job != nil {
		s.n.closeJob(s.job)
	}
}

// pluginFetches serializes the fetching of one plugin by the sessions of
// several jobs at once (the stages of a graph share their plugin): a
// second export would replace the file under the first session's
// processes, and the file access the task user was granted on it.
var pluginFetches sync.Map // path -> *sync.Mutex

// fetchPlugin fetches the session's plugin to path unless a good copy
// is there.
func (s *session) fetchPlugin(ctx context.Context, path string) error {
	mu, _ := pluginFetches.LoadOrStore(path, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if s.pool.Check() == nil {
		return nil
	}
	if err := s.fetchFile(ctx, s.hello.Plugin, path, 0o755); err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	if err := s.pool.Check(); err != nil {
		os.Remove(path)
		return fmt.Errorf("plugin binary does not match its digest: %w", err)
	}
	return nil
}
