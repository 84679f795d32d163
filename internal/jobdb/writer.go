package jobdb

import (
	"cmp"
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

var errNoSpace = syscall.ENOSPC

// change is one queued write. Changes with the same non-empty key
// replace each other within a batch: the last one is written.
type change struct {
	key   string
	apply func(tx *batch) error
	// flushed, if set, receives the batch's result once it committed;
	// committed, if set, is called with it (on the writer's goroutine).
	flushed   chan error
	committed func(error)
}

// writer is the group-commit goroutine: it gathers changes for at most
// delay (or maxBatch changes) and commits them in one transaction.
type writer struct {
	db       *DB
	log      *slog.Logger
	delay    time.Duration
	maxBatch int
	in       chan change
	done     chan struct{}

	mu     sync.Mutex
	err    error // sticky: the first failed batch
	closed bool

	stmts map[string]*sql.Stmt // prepared once, used by the loop only
	// multis holds the multi-row forms of multiRowQueries (multi).
	multis map[multiKey]string
	// qAttempt is the attempts insert of the database's schema.
	qAttempt string

	// rows says, per task index, what the database holds of the task's
	// rows, so that a change writes only what is new (used by the loop
	// only). fresh: the tasks table was empty at Open, so a task never
	// written has no rows.
	rows  []taskRows
	fresh bool
	// execs counts statements executed (benchmarks report it per task),
	// commits the transactions, rows the rows written by multi-row
	// inserts; Close logs them.
	execs, commits, rowsOut int

	// The batches' queued rows by query (batch.rows) and their order,
	// and flush's
	// buffers. unsorted: the rows go in the order they came (a
	// benchmark's comparison).
	queued   map[string][]any
	order    []string
	perm     []int
	args     []any
	unsorted bool
}

// taskRows is what the database holds of one task, as far as the writer
// knows.
type taskRows struct {
	seen bool // the entry is set up
	row  bool // this writer wrote the task's row
	// Rows of attempts, votes and partial results; -1: unknown (rows of
	// an earlier run may be there).
	attempts, votes, partials int32
}

// rowsOf returns task idx's entry, growing the table.
func (w *writer) rowsOf(idx int) *taskRows {
	if idx >= len(w.rows) {
		w.rows = append(w.rows, make([]taskRows, idx+1-len(w.rows))...)
	}
	r := &w.rows[idx]
	if !r.seen {
		r.seen = true
		if !w.fresh {
			r.attempts, r.votes, r.partials = -1, -1, -1
		}
	}
	return r
}

// batch is one transaction of the writer: changes execute statements
// through it, each prepared once for the writer's life.
type batch struct {
	ctx   context.Context
	tx    *sql.Tx
	w     *writer
	stmts map[string]*sql.Stmt // the writer's statements bound to tx
	// rows of inserts (multiRowQueries) not executed yet, by query, and
	// the queries in the order of their first row.
	// (The writer's queued and order, kept from batch to batch with
	// their room.)
	rows  map[string][]any
	order []string
	// now is the time the batch's rows are written (one transaction,
	// one time: formatted once, not per row).
	now string
}

// insert queues a row of query, one of multiRowQueries, whose first
// argument is the task's index: the rows go into the database when the
// batch ends (flush), multiRows at a time in one statement, in the order
// of their tasks. A batch holds one change per task, so no statement of
// the batch depends on a row still queued.
func (b *batch) insert(query string, args ...any) error {
	q := b.rows[query]
	if len(q) == 0 {
		b.order = append(b.order, query)
	}
	b.rows[query] = append(q, args...)
	return nil
}

// flush executes the queued rows of each query sorted by task (stable: a
// task's rows keep their order), in statements of multiRows rows and the
// rest in statements of a power of two rows each (all prepared): r rows
// cost r/multiRows + popcount(r%multiRows) statements. Sorted, the rows
// of one statement are neighbours in the table and its indexes: a
// statement changes few pages (and journals few: a statement of many
// rows keeps a journal to undo itself), where the results of many peers
// come interleaved.
func (b *batch) flush() error {
	for _, query := range b.order {
		q := b.rows[query]
		n := strings.Count(query, "?")
		rows := len(q) / n
		w := b.w
		perm := w.perm[:0]
		for r := range rows {
			perm = append(perm, r)
		}
		w.perm = perm
		if !w.unsorted {
			slices.SortStableFunc(perm, func(x, y int) int { return cmp.Compare(rowTask(q, x*n), rowTask(q, y*n)) })
		}
		for len(perm) > 0 {
			k := multiRows
			for k > len(perm) {
				k /= 2
			}
			args := w.args[:0]
			for _, r := range perm[:k] {
				args = append(args, q[r*n:(r+1)*n]...)
			}
			w.args = args
			if err := b.exec(b.w.multi(query, k), args...); err != nil {
				return err
			}
			w.rowsOut += k
			perm = perm[k:]
		}
		clear(q) // no data held past the batch
		b.rows[query] = q[:0]
	}
	b.w.order = b.order[:0]
	clear(b.w.args)
	return nil
}

// rowTask is the task index that a queued row starts with (at q[i]).
func rowTask(q []any, i int) int {
	t, _ := q[i].(int)
	return t
}

// multiRows rows of an insert go in one statement.
const multiRows = 32

// multiRowQuery is query (INSERT ... VALUES (?, ...) [ON CONFLICT ...])
// for rows rows.
func multiRowQuery(query string, rows int) string {
	if rows == 1 {
		return query
	}
	i := strings.LastIndex(query, "VALUES ") + len("VALUES ")
	j := i + strings.IndexByte(query[i:], ')') + 1
	tuple := query[i:j]
	return query[:i] + strings.Repeat(tuple+", ", rows-1) + tuple + query[j:]
}

// multi returns multiRowQuery(query, rows), made once.
func (w *writer) multi(query string, rows int) string {
	k := multiKey{query, rows}
	q, ok := w.multis[k]
	if !ok {
		q = multiRowQuery(query, rows)
		w.multis[k] = q
	}
	return q
}

type multiKey struct {
	query string
	rows  int
}

func (b *batch) exec(query string, args ...any) error {
	b.w.execs++
	st := b.stmts[query]
	if st == nil {
		prep := b.w.stmts[query]
		if prep == nil {
			_, err := b.tx.ExecContext(b.ctx, query, args...)
			return err
		}
		st = b.tx.StmtContext(b.ctx, prep)
		b.stmts[query] = st
	}
	_, err := st.ExecContext(b.ctx, args...)
	return err
}

func newWriter(ctx context.Context, db *DB, opts Options) (*writer, error) {
	w := &writer{db: db, log: opts.Logger, delay: opts.Delay, maxBatch: opts.MaxBatch,
		in: make(chan change, opts.MaxBatch), done: make(chan struct{}), stmts: map[string]*sql.Stmt{},
		multis: map[multiKey]string{}}
	var n int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM tasks LIMIT 1)").Scan(&n); err != nil {
		return nil, db.wrap("read tasks", err)
	}
	w.fresh = n == 0
	w.qAttempt = qAttempt
	if v, _, err := db.version(ctx); err == nil && v < 3 {
		w.qAttempt = qAttemptV2
	}
	attempts := func(q string) string {
		if q == qAttempt {
			return w.qAttempt
		}
		return q
	}
	// Prepared on the one connection while no transaction holds it: a
	// transaction's use of them then reuses the connection's statements.
	var queries []string
	for _, q := range writeQueries {
		queries = append(queries, attempts(q))
	}
	for _, q := range multiRowQueries {
		for rows := multiRows; rows > 1; rows /= 2 {
			queries = append(queries, w.multi(attempts(q), rows))
		}
	}
	for _, q := range queries {
		st, err := db.sql.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range w.stmts {
				st.Close()
			}
			return nil, db.wrap("prepare", err)
		}
		w.stmts[q] = st
	}
	go w.loop()
	return w, nil
}

// put queues c; it blocks while the queue is full. After an error, or
// after close, the change is dropped and the error returned.
func (w *writer) put(c change) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if err := w.err; err != nil {
		w.mu.Unlock()
		return err
	}
	w.mu.Unlock()
	w.in <- c
	return nil
}

func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// flush waits until every change queued before it is committed.
func (w *writer) flush(ctx context.Context) error {
	done := make(chan error, 1)
	if err := w.put(change{flushed: done}); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *writer) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.failed()
	}
	w.closed = true
	w.mu.Unlock()
	close(w.in)
	<-w.done
	w.log.Debug("job database closed", "statements", w.execs, "transactions", w.commits, "rows", w.rowsOut)
	return w.failed()
}

func (w *writer) loop() {
	defer close(w.done)
	defer func() {
		for _, st := range w.stmts {
			st.Close()
		}
	}()
	var batch []change
	keys := map[string]int{}
	for {
		c, ok := <-w.in
		if !ok {
			return
		}
		batch = addChange(batch[:0], keys, c)
		timer := time.NewTimer(w.delay)
	gather:
		for len(batch) < w.maxBatch {
			select {
			case c, ok := <-w.in:
				if !ok {
					break gather
				}
				batch = addChange(batch, keys, c)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		clear(keys)
		w.commit(batch)
	}
}

func addChange(batch []change, keys map[string]int, c change) []change {
	if c.key != "" {
		if i, ok := keys[c.key]; ok {
			batch[i].apply = c.apply
			return batch
		}
		keys[c.key] = len(batch)
	}
	return append(batch, c)
}

// commit writes a batch in one transaction and answers its flushes.
func (w *writer) commit(batch []change) {
	err := w.failed()
	if err == nil && slices.ContainsFunc(batch, func(c change) bool { return c.apply != nil }) {
		err = w.apply(batch)
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			w.log.Error("job database write failed; the run stops", "err", err)
		}
	}
	for _, c := range batch {
		if c.flushed != nil {
			c.flushed <- err
		}
		if c.committed != nil {
			c.committed(err)
		}
	}
}

func (w *writer) apply(changes []change) error {
	ctx := context.Background()
	tx, err := w.db.sql.BeginTx(ctx, nil)
	if err != nil {
		return w.db.wrap("begin", err)
	}
	if w.queued == nil {
		w.queued = map[string][]any{}
	}
	for k, q := range w.queued {
		clear(q) // a failed batch's rows
		w.queued[k] = q[:0]
	}
	b := &batch{ctx: ctx, tx: tx, w: w, stmts: map[string]*sql.Stmt{}, rows: w.queued, order: w.order[:0], now: now()}
	for _, c := range changes {
		if c.apply == nil {
			continue
		}
		if err := c.apply(b); err != nil {
			tx.Rollback()
			return w.db.wrap("write", err)
		}
	}
	if err := b.flush(); err != nil {
		tx.Rollback()
		return w.db.wrap("write", err)
	}
	if err := tx.Commit(); err != nil {
		return w.db.wrap("commit", err)
	}
	w.commits++
	return nil
}

// Flush waits until every change made before it is committed, and
// returns the writer's error, if any.
func (db *DB) Flush(ctx context.Context) error { return db.w.flush(ctx) }

// OnCommit calls fn once every change made before it is committed (err
// nil) or has failed, on the writer's goroutine: fn must not block. It
// does not wait.
func (db *DB) OnCommit(fn func(err error)) error {
	return db.w.put(change{committed: fn})
}

// Err returns the writer's first error (sticky), or nil.
func (db *DB) Err() error { return db.w.failed() }
