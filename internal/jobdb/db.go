package jobdb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// FileName is the database's name inside a job's output folder.
const FileName = "job.db"

// SchemaVersion is the newest schema this package reads and writes.
const SchemaVersion = 6

// schemaTarget is the version Open migrates to: SchemaVersion, lower only
// in tests that make a database of an older schema.
var schemaTarget = SchemaVersion

// Errors a caller tells apart.
var (
	// ErrNewer: the database was written by a newer p2pc (a higher schema
	// version); it is left alone.
	ErrNewer = errors.New("written by a newer p2pc")
	// ErrCorrupt: the file is not a readable SQLite database (corrupted or
	// truncated); it is left alone.
	ErrCorrupt = errors.New("corrupted or truncated")
	// ErrFull: the disk (or the file system's quota) is full; what was
	// committed before is kept.
	ErrFull = errors.New("disk full")
	// ErrClosed: the database was closed.
	ErrClosed = errors.New("job database closed")
)

// TimeFormat is how times are stored: fixed width, UTC.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// migrations[i] brings a database from version i to i+1.
var migrations = [][]string{
	{ // 0 -> 1
		`CREATE TABLE job (
			key   TEXT PRIMARY KEY,
			value TEXT NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE tasks (
			idx         INTEGER PRIMARY KEY,
			id          TEXT NOT NULL UNIQUE,
			params      TEXT NOT NULL,
			state       TEXT NOT NULL,
			peer        TEXT NOT NULL DEFAULT '',
			peer_id     TEXT NOT NULL DEFAULT '',
			digest      TEXT NOT NULL DEFAULT '',
			files       TEXT,
			error       TEXT NOT NULL DEFAULT '',
			verdict     TEXT NOT NULL DEFAULT '',
			checkpoints INTEGER NOT NULL DEFAULT 0,
			updated     TEXT NOT NULL
		)`,
		`CREATE INDEX tasks_state ON tasks(state)`,
		`CREATE TABLE attempts (
			task    INTEGER NOT NULL,
			n       INTEGER NOT NULL,
			peer    TEXT NOT NULL,
			peer_id TEXT NOT NULL DEFAULT '',
			start   TEXT NOT NULL,
			end     TEXT NOT NULL,
			outcome TEXT NOT NULL,
			error   TEXT NOT NULL DEFAULT '',
			resumed INTEGER NOT NULL DEFAULT 0,
			trusted INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (task, n)
		) WITHOUT ROWID`,
		`CREATE INDEX attempts_end ON attempts(end)`,
		`CREATE TABLE votes (
			task    INTEGER NOT NULL,
			n       INTEGER NOT NULL,
			peer    TEXT NOT NULL,
			peer_id TEXT NOT NULL DEFAULT '',
			digest  TEXT NOT NULL,
			PRIMARY KEY (task, n)
		) WITHOUT ROWID`,
		`CREATE TABLE partials (
			task      INTEGER NOT NULL,
			n         INTEGER NOT NULL,
			time      TEXT NOT NULL,
			peer      TEXT NOT NULL,
			peer_id   TEXT NOT NULL DEFAULT '',
			text      TEXT,
			bytes     BLOB,
			truncated INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (task, n)
		) WITHOUT ROWID`,
		`CREATE TABLE outputs (
			task INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			data BLOB NOT NULL
		)`,
	},
	{ // 1 -> 2: the virtual computer's state (package vc), so that a
		// resumed job has its globals, messages and checkpoints back.
		`CREATE TABLE vc_globals (
			key     TEXT PRIMARY KEY,
			version INTEGER NOT NULL,
			value   BLOB NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE vc_messages (
			task   TEXT NOT NULL,
			seq    INTEGER NOT NULL,
			sender TEXT NOT NULL,
			data   BLOB NOT NULL,
			PRIMARY KEY (task, seq)
		) WITHOUT ROWID`,
		`CREATE TABLE vc_checkpoints (
			task  TEXT PRIMARY KEY,
			seq   INTEGER NOT NULL,
			pos   INTEGER NOT NULL,
			time  TEXT NOT NULL,
			block TEXT NOT NULL DEFAULT '',
			state BLOB NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE vc_ops (
			task    TEXT NOT NULL,
			n       INTEGER NOT NULL,
			op      TEXT NOT NULL,
			key     TEXT NOT NULL,
			ok      INTEGER NOT NULL DEFAULT 0,
			version INTEGER NOT NULL DEFAULT 0,
			value   BLOB,
			error   TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (task, n)
		) WITHOUT ROWID`,
	},
	{ // 2 -> 3: attempts a peer finished while the coordinator was gone
		// and handed over to the rerun.
		`ALTER TABLE attempts ADD COLUMN handed_over INTEGER NOT NULL DEFAULT 0`,
	},
	{ // 3 -> 4: each task's key (what its output is a function of: an
		// edited job reuses the tasks whose key is unchanged), NULL in the
		// rows of older databases; and whether a run reused the task's
		// record from an earlier run rather than running it.
		`ALTER TABLE tasks ADD COLUMN key BLOB`,
		`ALTER TABLE tasks ADD COLUMN reused INTEGER NOT NULL DEFAULT 0`,
	},
	{ // 4 -> 5: the device a peer's slot bound for an attempt (a GPU).
		`ALTER TABLE attempts ADD COLUMN device TEXT NOT NULL DEFAULT ''`,
	},
	{ // 5 -> 6: the place of each task in a fork tree (a round of a job
		// whose tasks spawn, tree.go).
		`CREATE TABLE tree (
			task      TEXT PRIMARY KEY,
			parent    TEXT NOT NULL DEFAULT '',
			depth     INTEGER NOT NULL,
			children  TEXT NOT NULL DEFAULT '',
			suspended INTEGER NOT NULL DEFAULT 0
		) WITHOUT ROWID`,
	},
}

// Options tune Open.
type Options struct {
	// Version names this p2pc in schema_version and in errors.
	Version string
	// Delay bounds how long a change waits before its batch commits
	// (default 5ms; a Flush commits at once); MaxBatch bounds a batch
	// (default 4096 changes).
	Delay    time.Duration
	MaxBatch int
	Logger   *slog.Logger
}

// DB is an open job database.
type DB struct {
	path string
	sql  *sql.DB
	w    *writer // nil when read-only

	jobMu   sync.Mutex
	lastJob [][2]string // the job rows PutJob queued last

	// qAttempts reads attempts (qReadAttempts, or its forms for a schema
	// older than 5, which lacks device, or 3, which lacks handed_over), qTasks tasks (qReadTasks, or
	// its form for a schema older than 4, which lacks key and reused).
	qAttempts, qTasks string
}

// noteSchema sets what the database's schema version v changes in the
// queries that read it.
func (db *DB) noteSchema(v int) {
	db.qAttempts, db.qTasks = qReadAttempts, qReadTasks
	if v < 5 {
		db.qAttempts = qReadAttemptsV4
	}
	if v < 3 {
		db.qAttempts = qReadAttemptsV2
	}
	if v < 4 {
		db.qTasks = qReadTasksV3
	}
}

// Path is the database file.
func (db *DB) Path() string { return db.path }

// SQL gives read access for queries of the caller's own.
func (db *DB) SQL() *sql.DB { return db.sql }

// Open opens the job database at path for writing, creating it if
// missing, and migrates it to SchemaVersion. A database of a newer
// schema gives ErrNewer, an unreadable one ErrCorrupt; neither is
// changed. Close it to flush its last changes.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	db, err := openWritable(ctx, path, &opts)
	if err != nil {
		return nil, err
	}
	if db.w, err = newWriter(ctx, db, opts); err != nil {
		db.sql.Close()
		return nil, err
	}
	return db, nil
}

// openWritable opens, checks and migrates the database at path, as Open
// does, without its writer; it fills opts' defaults.
func openWritable(ctx context.Context, path string, opts *Options) (*DB, error) {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Delay <= 0 {
		opts.Delay = 5 * time.Millisecond
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	existed, err := checkHeader(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// A statement of many rows (the writer's multi-row upserts) keeps a
	// statement journal, so that a failing row can undo the statement's
	// others: in memory rather than in a temporary file, it costs a
	// memcpy per page rather than a write(2).
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_txlock", "immediate")
	sdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open job database %s: %w", path, err)
	}
	sdb.SetMaxOpenConns(1) // one writer connection: no SQLITE_BUSY among ourselves
	db := &DB{path: path, sql: sdb}
	if err := db.prepare(ctx, existed, opts.Version); err != nil {
		sdb.Close()
		return nil, err
	}
	db.noteSchema(schemaTarget)
	return db, nil
}

// OpenReadOnly opens the job database at path for reading only: safe
// while a run writes it. It migrates nothing: an older schema is read as
// it is, a newer one gives ErrNewer.
func OpenReadOnly(ctx context.Context, path string) (*DB, error) {
	return openReadOnly(ctx, path, false)
}

// OpenClosed opens for reading a job database whose writer this process
// closed (the run's end, which still holds the output folder's lock):
// read as immutable, so that SQLite leaves no -wal and -shm files behind
// (a read-only connection makes them and cannot remove them). A
// write-ahead log left with content (a writer that failed) is read as
// OpenReadOnly does.
func OpenClosed(ctx context.Context, path string) (*DB, error) {
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return openReadOnly(ctx, path, false)
	}
	return openReadOnly(ctx, path, true)
}

func openReadOnly(ctx context.Context, path string, immutable bool) (*DB, error) {
	existed, err := checkHeader(path)
	if err != nil {
		return nil, err
	}
	if !existed {
		return nil, fmt.Errorf("open job database %s: %w", path, fs.ErrNotExist)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	q.Add("_pragma", "busy_timeout(5000)")
	sdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open job database %s: %w", path, err)
	}
	db := &DB{path: path, sql: sdb}
	v, _, err := db.version(ctx)
	switch {
	case hotJournal(err):
		// A job database is in WAL mode from its first commit on, so a
		// hot rollback journal means a writer killed in that first
		// commit (the switch to WAL): nothing was committed, and only
		// a writer (the next run) can roll the journal back.
		err = fmt.Errorf("job database %s: its first commit was cut short (%s-journal is left; the next run of the job rolls it back): %w", path, filepath.Base(path), fs.ErrNotExist)
	case err != nil:
	case v > SchemaVersion:
		err = db.newer(ctx, v)
	case v == 0:
		err = db.checkForeign(ctx)
	}
	if err != nil {
		sdb.Close()
		return nil, err
	}
	db.noteSchema(v)
	return db, nil
}

// hotJournal says whether err is SQLite's refusal to read a database
// whose hot rollback journal a read-only connection cannot roll back.
func hotJournal(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_READONLY_ROLLBACK
}

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// checkHeader says whether path exists, and gives ErrCorrupt for a file
// that is not a SQLite database (SQLite would make a new database of an
// empty file, and report other files only on first use). An empty file
// counts as missing.
func checkHeader(path string) (existed bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open job database: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		// SQLite made the file but was killed before its first commit:
		// there is nothing to lose, and SQLite starts it afresh.
		return false, nil
	}
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteMagic) {
		return true, fmt.Errorf("job database %s: %w: not a SQLite database", path, ErrCorrupt)
	}
	return true, nil
}

// prepare checks an existing database and migrates it.
func (db *DB) prepare(ctx context.Context, existed bool, version string) error {
	if existed {
		var res string
		if err := db.sql.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&res); err != nil {
			return db.wrap("check", err)
		}
		if res != "ok" {
			return fmt.Errorf("job database %s: %w: %s", db.path, ErrCorrupt, res)
		}
	}
	v, _, err := db.version(ctx)
	if err != nil {
		return err
	}
	if v > SchemaVersion {
		return db.newer(ctx, v)
	}
	if v == 0 && existed {
		if err := db.checkForeign(ctx); err != nil {
			return err
		}
	}
	// WAL only now: switching writes the file, which a refused database
	// must not see.
	var mode string
	if err := db.sql.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return db.wrap("journal mode", err)
	}
	if v < schemaTarget {
		return db.migrate(ctx, v, schemaTarget, version)
	}
	return nil
}

// checkForeign refuses a database without a schema version that holds
// tables: it is somebody else's.
func (db *DB) checkForeign(ctx context.Context) error {
	var n int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		return db.wrap("check", err)
	}
	if n > 0 {
		return fmt.Errorf("job database %s: %w: a SQLite database, but not a p2pc job's (no schema_version)", db.path, ErrCorrupt)
	}
	return nil
}

// migrate brings the database from version from to version to in one
// transaction (a new database is made in one commit; an older one is
// migrated whole or not at all).
func (db *DB) migrate(ctx context.Context, from, to int, version string) error {
	op := fmt.Sprintf("migrate to version %d", to)
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return db.wrap(op, err)
	}
	defer tx.Rollback()
	if from == 0 {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_version (
			version INTEGER PRIMARY KEY,
			p2pc    TEXT NOT NULL,
			applied TEXT NOT NULL
		)`); err != nil {
			return db.wrap("create schema_version", err)
		}
	}
	at := now()
	for v := from; v < to; v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return db.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_version(version, p2pc, applied) VALUES (?, ?, ?)",
			v+1, version, at); err != nil {
			return db.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return db.wrap(op, err)
	}
	return nil
}

// version returns the database's schema version (0: none yet) and the
// p2pc that wrote it.
func (db *DB) version(ctx context.Context) (int, string, error) {
	var v int
	var by string
	err := db.sql.QueryRowContext(ctx, "SELECT version, p2pc FROM schema_version ORDER BY version DESC LIMIT 1").Scan(&v, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, "", nil
	case err != nil && isNoTable(err):
		return 0, "", nil
	case err != nil:
		return 0, "", db.wrap("read schema version", err)
	}
	return v, by, nil
}

func (db *DB) newer(ctx context.Context, v int) error {
	_, by, _ := db.version(ctx)
	return fmt.Errorf("job database %s: %w: schema version %d (p2pc %s); this p2pc reads up to version %d: use a newer p2pc",
		db.path, ErrNewer, v, by, SchemaVersion)
}

// Version returns the database's schema version.
func (db *DB) Version(ctx context.Context) (int, error) {
	v, _, err := db.version(ctx)
	return v, err
}

// Close flushes pending changes (for a writable database) and closes it.
// It returns the writer's first error, if any.
func (db *DB) Close() error {
	var err error
	if db.w != nil {
		err = db.w.close()
	}
	if cerr := db.sql.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close job database: %w", cerr)
	}
	return err
}

// wrap names op and classifies SQLite's error codes: a full disk wraps
// ErrFull, a damaged file ErrCorrupt.
func (db *DB) wrap(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("job database %s: %s: %w: %w", db.path, op, ErrFull, err)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("job database %s: %s: %w: %w", db.path, op, ErrCorrupt, err)
		}
	}
	if errors.Is(err, errNoSpace) {
		return fmt.Errorf("job database %s: %s: %w: %w", db.path, op, ErrFull, err)
	}
	return fmt.Errorf("job database %s: %s: %w", db.path, op, err)
}

func isNoTable(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_ERROR && bytes.Contains([]byte(se.Error()), []byte("no such table"))
}

func now() string { return time.Now().UTC().Format(TimeFormat) }

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(TimeFormat, s)
	if err != nil {
		t, _ = time.Parse(time.RFC3339Nano, s)
	}
	return t
}
