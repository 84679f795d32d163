package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/outputs"
)

// storedIndex is what an earlier run stored of its tasks' outputs, read
// at once for reuse: the names in OUT/tasks (one listing, not one stat
// per task), and the digest of every inline output in the job database
// (one pass, not one query per task). A resumed run of 100,000 tasks
// checks its done ones without 100,000 round trips.
type storedIndex struct {
	folders map[string]bool
	inline  map[int]outputs.Digests // by task: the digests of its inline data file
}

func (r *runner) readStored(ctx context.Context) (*storedIndex, error) {
	s := &storedIndex{folders: map[string]bool{}, inline: map[int]outputs.Digests{}}
	f, err := os.Open(filepath.Join(r.p.OutDir, "tasks"))
	if err == nil {
		defer f.Close()
		for {
			names, err := f.Readdirnames(4096)
			for _, n := range names {
				s.folders[n] = true
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read tasks dir: %w", err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read tasks dir: %w", err)
	}
	err = r.db.Outputs(ctx, func(o jobdb.Output) error {
		s.inline[o.Idx] = outputs.DigestInlineAll(o.Data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
