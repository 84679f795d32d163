package harness

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// ReadReport reads the job in output folder dir as report.json would
// have it (jobdb.ReadReport: job.db, else report.json), also while the
// run writes it. A folder seen through another mount namespace
// (/proc/PID/root/...) is read from a copy of its database: SQLite
// resolves that magic link to this namespace's root, where the folder's
// mount is not.
func ReadReport(dir string) (*report.Report, error) {
	db, done, err := JobDBDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return report.Read(dir) // no database: an older run's folder
	}
	if err != nil {
		return nil, err
	}
	defer done()
	return jobdb.ReadReport(context.Background(), db)
}

// JobDBDir returns a folder holding output folder dir's job.db that this
// process's SQLite can open: dir itself, or for a folder seen through
// another mount namespace (/proc/PID/root/...) a copy, which done
// removes. It fails wrapping fs.ErrNotExist when dir has no job.db.
func JobDBDir(dir string) (db string, done func(), err error) {
	if !strings.HasPrefix(dir, "/proc/") {
		if _, err := os.Stat(filepath.Join(dir, jobdb.FileName)); err != nil {
			return "", nil, err
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "p2pc-report-")
	if err != nil {
		return "", nil, err
	}
	for _, suffix := range []string{"", "-wal"} {
		err := copyFile(filepath.Join(dir, jobdb.FileName+suffix), filepath.Join(tmp, jobdb.FileName+suffix))
		if err != nil && (suffix == "" || !errors.Is(err, fs.ErrNotExist)) {
			os.RemoveAll(tmp)
			return "", nil, err
		}
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
