package outputs

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Gather moves a result's files from work into stage and writes its
// inline data as stage/data.
func Gather(work, stage string, res *sdk.Result) error {
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return fmt.Errorf("stage outputs: %w", err)
	}
	root, err := os.OpenRoot(work)
	if err != nil {
		return fmt.Errorf("stage outputs: %w", err)
	}
	defer root.Close()
	seen := map[string]bool{}
	if res.Data != nil {
		seen[sdk.DataFile] = true
		if err := os.WriteFile(filepath.Join(stage, sdk.DataFile), res.Data, 0o644); err != nil {
			return fmt.Errorf("stage outputs: %w", err)
		}
	}
	for _, f := range res.Files {
		name := filepath.Clean(f)
		if !filepath.IsLocal(name) {
			return &sdk.TaskError{Msg: fmt.Sprintf("output file %q is not inside the work dir", f)}
		}
		if seen[name] {
			return &sdk.TaskError{Msg: fmt.Sprintf("output file %q listed twice (or collides with the inline data file %q)", f, sdk.DataFile)}
		}
		seen[name] = true
		fi, err := root.Lstat(name)
		if err != nil {
			return &sdk.TaskError{Msg: fmt.Sprintf("output file %q: %v", f, err)}
		}
		if !fi.Mode().IsRegular() {
			return &sdk.TaskError{Msg: fmt.Sprintf("output file %q is not a regular file (%s)", f, fi.Mode().Type())}
		}
		dst := filepath.Join(stage, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("stage outputs: %w", err)
		}
		if err := os.Rename(filepath.Join(work, name), dst); err != nil {
			return fmt.Errorf("stage outputs: %w", err)
		}
	}
	return nil
}

// Digest returns the digest of the files below dir (its canonical
// listing: "<sha256> <size> <name>\n" per regular file, sorted by
// slash-separated name) and the sorted names.
func Digest(dir string) (digest.ID, []string, error) {
	type entry struct {
		name string
		size int64
		sum  [32]byte
	}
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		sum, err := digest.File(path)
		if err != nil {
			return err
		}
		entries = append(entries, entry{filepath.ToSlash(rel), fi.Size(), sum})
		return nil
	})
	if err != nil {
		return digest.ID{}, nil, fmt.Errorf("digest outputs: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	h := sha256.New()
	names := make([]string, len(entries))
	for i, e := range entries {
		fmt.Fprintf(h, "%x %d %s\n", e.sum, e.size, e.name)
		names[i] = e.name
	}
	var id digest.ID
	h.Sum(id[:0])
	return id, names, nil
}

// DigestInline returns what Digest would return for an output made of the
// inline data alone (the file "data", or no file at all when data is
// nil), without touching the disk.
func DigestInline(data []byte) digest.ID {
	h := sha256.New()
	if data != nil {
		fmt.Fprintf(h, "%x %d %s\n", sha256.Sum256(data), len(data), sdk.DataFile)
	}
	var id digest.ID
	h.Sum(id[:0])
	return id
}
