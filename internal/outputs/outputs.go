package outputs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

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
		if err := CheckName(f); err != nil {
			return &sdk.TaskError{Msg: err.Error()}
		}
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

// CheckName refuses an output name that holds a control character (a
// byte below 0x20, or 0x7f): such a name reads as something else in a
// log or a listing. Every name is length-prefixed in the canonical
// listing all the same.
func CheckName(name string) error {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("output file name %q holds a control character (0x%02x)", name, c)
		}
	}
	return nil
}

// Digests is what Digest computes of a folder: its digest, and the
// digest of the same files under the listing of version 1 (see Legacy).
type Digests struct {
	ID, Legacy digest.ID
}

// Digest returns the digest of the files below dir (its canonical
// listing, version 2: "<sha256> <size> <length of name>:<name>\n" per
// regular file, sorted by slash-separated name) and the sorted names.
// A name holding a control character is refused (CheckName).
func Digest(dir string) (digest.ID, []string, error) {
	entries, names, err := walk(dir)
	if err != nil {
		return digest.ID{}, nil, err
	}
	return listing(entries, false), names, nil
}

// DigestAll is Digest with the version 1 digest beside it, from the same
// reading of the files: a job folder written before version 2 holds
// version 1 digests in its job database.
func DigestAll(dir string) (Digests, []string, error) {
	entries, names, err := walk(dir)
	if err != nil {
		return Digests{}, nil, err
	}
	return Digests{ID: listing(entries, false), Legacy: listing(entries, true)}, names, nil
}

// walk reads the regular files below dir, sorted by name, and their names.
func walk(dir string) ([]entry, []string, error) {
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
		if err := CheckName(rel); err != nil {
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
		return nil, nil, fmt.Errorf("digest outputs: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	return entries, names, nil
}

// entry is one file of a listing.
type entry struct {
	name string
	size int64
	sum  digest.ID
}

// listing hashes the canonical listing of entries (sorted): version 2,
// or version 1 (legacy: names as they are, which two different sets of
// files can share when a name holds a newline).
func listing(entries []entry, legacy bool) digest.ID {
	h := sha256.New()
	var line []byte
	for _, e := range entries {
		line = hex.AppendEncode(line[:0], e.sum[:])
		line = append(line, ' ')
		line = strconv.AppendInt(line, e.size, 10)
		line = append(line, ' ')
		if !legacy {
			line = strconv.AppendInt(line, int64(len(e.name)), 10)
			line = append(line, ':')
		}
		line = append(line, e.name...)
		line = append(line, '\n')
		h.Write(line)
	}
	var id digest.ID
	h.Sum(id[:0])
	return id
}

// DigestInline returns what Digest would return for an output made of the
// inline data alone (the file "data", or no file at all when data is
// nil), without touching the disk.
func DigestInline(data []byte) digest.ID { return inline(data, false) }

// DigestInlineAll is DigestInline with the version 1 digest beside it
// (see DigestAll), from one hashing of data.
func DigestInlineAll(data []byte) Digests {
	if data == nil {
		return Digests{ID: listing(nil, false), Legacy: listing(nil, true)}
	}
	e := []entry{{sdk.DataFile, int64(len(data)), digest.Sum(data)}}
	return Digests{ID: listing(e, false), Legacy: listing(e, true)}
}

func inline(data []byte, legacy bool) digest.ID {
	if data == nil {
		return listing(nil, legacy)
	}
	return listing([]entry{{sdk.DataFile, int64(len(data)), digest.Sum(data)}}, legacy)
}
