package dirlock

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FileName is the lock file inside an owned folder.
const FileName = ".p2pc-lock"

// LegacyAge is how long a folder without a lock file must have been left
// unchanged before Sweep removes it.
const LegacyAge = 24 * time.Hour

// stagingSuffix ends the hidden name a folder has while Make builds it.
const stagingSuffix = ".staging"

// stagingAge is how old a staging folder must be before Sweep looks at
// it: its lock file exists, unlocked, for an instant while Make runs.
const stagingAge = time.Minute

var errHeld = errors.New("lock held")

// Owner is what a lock file says about the process that holds it.
type Owner struct {
	PID   int
	Host  string
	Start time.Time
}

func (o Owner) String() string {
	if o.PID == 0 {
		return "another process (it has not written its name yet)"
	}
	return fmt.Sprintf("pid %d on %s, started %s", o.PID, o.Host, o.Start.Local().Format(time.DateTime))
}

// self is this process as an Owner.
var self = func() Owner {
	host, _ := os.Hostname()
	return Owner{PID: os.Getpid(), Host: host, Start: time.Now()}
}()

func (o Owner) encode() []byte {
	return fmt.Appendf(nil, "pid %d\nhost %s\nstart %s\n", o.PID, o.Host, o.Start.UTC().Format(time.RFC3339Nano))
}

func parseOwner(b []byte) Owner {
	var o Owner
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "pid":
			o.PID, _ = strconv.Atoi(v)
		case "host":
			o.Host = v
		case "start":
			o.Start, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	return o
}

// HeldError says that another open lock holds a lock file.
type HeldError struct {
	Path  string
	Owner Owner
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked by %s", e.Path, e.Owner)
}

// Lock is a held lock on one lock file. Keep it reachable for as long as
// it must hold: the garbage collector closes an unreachable file, and the
// lock goes with it.
type Lock struct {
	path string
	f    *os.File
}

// Acquire locks the file at path, creating it, without waiting, and
// writes this process into it as the owner. When another holds it, the
// error is a *HeldError naming that owner and nothing is changed.
func Acquire(path string) (*Lock, error) {
	// A holder that releases unlinks the file before it unlocks: a lock
	// taken on the unlinked file is worth nothing, so try again on the
	// new one. Each turn means another process released: a few suffice.
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		switch err := lockFile(f); {
		case errors.Is(err, errHeld):
			b, _ := os.ReadFile(path)
			f.Close()
			return nil, &HeldError{Path: path, Owner: parseOwner(b)}
		case err != nil:
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !sameFile(f, path) {
			f.Close()
			continue
		}
		if err := writeOwner(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return &Lock{path: path, f: f}, nil
	}
	return nil, fmt.Errorf("lock %s: the lock file keeps being replaced", path)
}

func writeOwner(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(self.encode(), 0)
	return err
}

// Release removes the lock file, then lets the lock go. (In that order: a
// process that opened the file meanwhile finds, once it has the lock,
// that the file is no longer at the path.)
func (l *Lock) Release() error {
	err := os.Remove(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, l.f.Close())
}

// Unlock lets the lock go and leaves the lock file in place.
func (l *Lock) Unlock() error {
	return l.f.Close()
}

// Dir is a folder this process owns: it holds the lock in it until Remove
// (keep it reachable until then, as a Lock).
type Dir struct {
	// Path is the folder.
	Path string
	f    *os.File
}

// Make creates a folder named prefix + a random suffix in parent (which
// must exist), owned by this process until Remove. The folder is 0700.
func Make(parent, prefix string) (*Dir, error) {
	if strings.ContainsRune(prefix, filepath.Separator) {
		return nil, fmt.Errorf("make owned folder: prefix %q holds a path separator", prefix)
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	rnd := hex.EncodeToString(suffix[:])
	staging := filepath.Join(parent, "."+prefix+rnd+stagingSuffix)
	final := filepath.Join(parent, prefix+rnd)
	if err := os.Mkdir(staging, 0o700); err != nil {
		return nil, fmt.Errorf("make owned folder: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(staging, FileName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = lockFile(f); err == nil {
			err = writeOwner(f)
		}
		if err != nil {
			f.Close()
		}
	}
	if err == nil {
		err = os.Rename(staging, final)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(staging)
		return nil, fmt.Errorf("make owned folder: %w", err)
	}
	return &Dir{Path: final, f: f}, nil
}

// Remove removes the folder and everything in it, then lets the lock go.
// It may be called more than once.
func (d *Dir) Remove() error {
	if d == nil || d.f == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	d.f.Close()
	d.f = nil
	if err != nil {
		return fmt.Errorf("remove owned folder: %w", err)
	}
	return nil
}

// Sweep removes the folders in parent that Make made with a name starting
// with prefix and whose owner is gone (their lock can be taken), and the
// staging folders of such names whose maker died. Folders without a lock
// file are removed only when unchanged for LegacyAge. It returns the
// folders it removed; a folder it cannot remove is left, and named in the
// error.
func Sweep(parent, prefix string) ([]string, error) {
	if !haveFlock {
		return nil, nil
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("sweep %s: %w", parent, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !sweepable(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if strings.HasSuffix(e.Name(), stagingSuffix) && !olderThan(dir, stagingAge) {
			continue
		}
		ok, err := sweepOne(dir)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepable: name is a final or a staging name of Make(_, prefix).
func sweepable(name, prefix string) bool {
	if strings.HasPrefix(name, "."+prefix) && strings.HasSuffix(name, stagingSuffix) {
		return true
	}
	return strings.HasPrefix(name, prefix) && (strings.HasPrefix(prefix, ".") || !strings.HasPrefix(name, "."))
}

// sweepOne removes dir if its owner is gone, and says whether it did.
func sweepOne(dir string) (bool, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if !olderThan(dir, LegacyAge) {
			return false, nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return false, fmt.Errorf("sweep %s: %w", dir, err)
		}
		return true, nil
	}
	if err != nil {
		return false, nil // not ours to judge (another user's folder)
	}
	defer f.Close()
	if lockFile(f) != nil || !sameFile(f, path) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("sweep %s: %w", dir, err)
	}
	return true, nil
}

// olderThan: path exists and has not changed for age.
func olderThan(path string, age time.Duration) bool {
	fi, err := os.Lstat(path)
	return err == nil && time.Since(fi.ModTime()) >= age
}

// sameFile reports whether f is still the file at path (not unlinked or
// replaced after it was opened).
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}
