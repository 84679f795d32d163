package jobdb

import (
	"cmp"
	"context"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

var errNoSpace = syscall.ENOSPC

// change is one queued write. Changes with the same non-zero key
// replace each other within a batch: the last one is written.
type change struct {
	key   changeKey
	apply func(tx *batch) error
	// flushed, if set, receives the batch's result once it committed;
	// committed, if set, is called with it (on the writer's goroutine).
	flushed   chan error
	committed func(error)
}

// changeKey names what a change writes whole (the zero key: nothing a
// later change replaces): a task's row (keyTask), its inline output
// (keyOutput), by index; the job's fields (keyJob), or one job value
// (keyJobValue), by name. A struct, not a string: no allocation per
// change.
type changeKey struct {
	kind uint8
	idx  int
	name string
}

const (
	keyNone uint8 = iota
	keyTask
	keyOutput
	keyJob
	keyJobValue
)

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

	// stmts are prepared once on the driver's connection (stmtsConn),
	// used by the loop only (rawConn).
	stmts     map[string]driver.Stmt
	stmtsConn any
	// nv is exec's buffer of arguments.
	nv []driver.NamedValue
	// multis holds the multi-row forms of multiRowQueries (multi);
	// queries are the statements prepared (writeQueries and those).
	multis  map[multiKey]string
	queries []string
	// qAttempt is the attempts insert of the database's schema, qTask and
	// qTaskUpdate the tasks' (older schemas lack columns: tests only).
	qAttempt, qTask, qTaskUpdate string

	// rows says, per task index, what the database holds of the task's
	// rows, so that a change writes only what is new (used by the loop
	// only). fresh: the tasks table was empty at Open, so a task never
	// written has no rows.
	rows  rowsTable
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

// rowsOf returns task idx's entry (to be stored back with w.rows.set).
func (w *writer) rowsOf(idx int) taskRows {
	r := w.rows.get(idx)
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
	ctx  context.Context
	conn any // the driver's connection (rawConn)
	w    *writer
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

// exec executes query with args in the batch's transaction: a statement
// prepared once if query is one of the writer's, else as it comes.
// Straight to the driver, not through database/sql: a statement of many
// rows has hundreds of arguments, which database/sql would copy and
// check one by one (its allocation per statement was the largest of a
// run).
func (b *batch) exec(query string, args ...any) error {
	w := b.w
	w.execs++
	nv := w.nv[:0]
	for i, a := range args {
		v, err := driverValue(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	w.nv = nv
	defer clear(nv) // no data held past the statement
	st, err := w.stmt(b.ctx, b.conn, query)
	if err != nil {
		return err
	}
	if st == nil {
		ex, ok := b.conn.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("sqlite driver: no ExecerContext")
		}
		_, err := ex.ExecContext(b.ctx, query, nv)
		return err
	}
	_, err = st.(driver.StmtExecContext).ExecContext(b.ctx, nv)
	return err
}

// driverValue is a as a driver.Value: the common kinds at once, the rest
// as database/sql would convert them.
func driverValue(a any) (driver.Value, error) {
	switch v := a.(type) {
	case nil, string, []byte, int64, bool, float64, time.Time:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}

// stmt is the writer's prepared statement of query on the driver's
// connection conn, nil if query is not one of the writer's
// (writer.queries). A connection other than the one they were prepared
// on (database/sql opened another) gets them prepared anew.
func (w *writer) stmt(ctx context.Context, conn any, query string) (driver.Stmt, error) {
	if conn != w.stmtsConn {
		if w.stmtsConn != nil {
			w.log.Debug("job database: statements prepared again on a new connection")
		}
		w.stmts = map[string]driver.Stmt{} // the old connection's went with it
		w.stmtsConn = conn
		for _, q := range w.queries {
			if err := w.prepare(ctx, conn, q); err != nil {
				return nil, err
			}
		}
	}
	return w.stmts[query], nil
}

func (w *writer) prepare(ctx context.Context, conn any, query string) error {
	pc, ok := conn.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("sqlite driver: no ConnPrepareContext")
	}
	st, err := pc.PrepareContext(ctx, query)
	if err != nil {
		return w.db.wrap("prepare", err)
	}
	if _, ok := st.(driver.StmtExecContext); !ok {
		st.Close()
		return fmt.Errorf("sqlite driver: no StmtExecContext")
	}
	w.stmts[query] = st
	return nil
}

// closeStmts closes the prepared statements (on their connection, held).
func (w *writer) closeStmts(conn any) {
	if conn == w.stmtsConn {
		for _, st := range w.stmts {
			st.Close()
		}
	}
	w.stmts, w.stmtsConn = nil, nil
}

// rawConn runs fn with the database's one connection as the driver's,
// held for fn alone.
func (w *writer) rawConn(ctx context.Context, fn func(conn any) error) error {
	c, err := w.db.sql.Conn(ctx)
	if err != nil {
		return w.db.wrap("connect", err)
	}
	defer c.Close()
	return c.Raw(fn)
}

func newWriter(ctx context.Context, db *DB, opts Options) (*writer, error) {
	w := &writer{db: db, log: opts.Logger, delay: opts.Delay, maxBatch: opts.MaxBatch,
		in: make(chan change, opts.MaxBatch), done: make(chan struct{}), multis: map[multiKey]string{}}
	var n int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM tasks LIMIT 1)").Scan(&n); err != nil {
		return nil, db.wrap("read tasks", err)
	}
	w.fresh = n == 0
	w.qAttempt, w.qTask, w.qTaskUpdate = qAttempt, qTask, qTaskUpdate
	if v, _, err := db.version(ctx); err == nil && v < 5 {
		w.qAttempt = qAttemptV4
		if v < 4 {
			w.qTask, w.qTaskUpdate = qTaskV3, qTaskUpdateV3
		}
		if v < 3 {
			w.qAttempt = qAttemptV2
		}
	}
	attempts := func(q string) string {
		switch q {
		case qAttempt:
			return w.qAttempt
		case qTask:
			return w.qTask
		case qTaskUpdate:
			return w.qTaskUpdate
		}
		return q
	}
	// Prepared on the one connection while no transaction holds it: a
	// transaction's use of them then reuses the connection's statements.
	for _, q := range writeQueries {
		w.queries = append(w.queries, attempts(q))
	}
	for _, q := range multiRowQueries {
		for rows := multiRows; rows > 1; rows /= 2 {
			w.queries = append(w.queries, w.multi(attempts(q), rows))
		}
	}
	if err := w.rawConn(ctx, func(conn any) error {
		if _, err := w.stmt(ctx, conn, ""); err != nil {
			w.closeStmts(conn)
			return err
		}
		return nil
	}); err != nil {
		return nil, err
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
		_ = w.rawConn(context.Background(), func(conn any) error {
			w.closeStmts(conn)
			return nil
		})
	}()
	var batch []change
	keys := map[changeKey]int{}
	for {
		c, ok := <-w.in
		if !ok {
			return
		}
		batch = addChange(batch[:0], keys, c)
		timer := time.NewTimer(w.delay)
	gather:
		// A Flush ends the gathering: its caller waits for the commit.
		for len(batch) < w.maxBatch && c.flushed == nil {
			select {
			case c, ok = <-w.in:
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

func addChange(batch []change, keys map[changeKey]int, c change) []change {
	if c.key.kind != keyNone {
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
	return w.rawConn(ctx, func(conn any) error { return w.applyOn(ctx, conn, changes) })
}

// applyOn writes changes in one transaction on the driver's connection.
func (w *writer) applyOn(ctx context.Context, conn any, changes []change) error {
	bc, ok := conn.(driver.ConnBeginTx)
	if !ok {
		return fmt.Errorf("sqlite driver: no ConnBeginTx")
	}
	tx, err := bc.BeginTx(ctx, driver.TxOptions{})
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
	b := &batch{ctx: ctx, conn: conn, w: w, rows: w.queued, order: w.order[:0], now: now()}
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
// returns the writer's error, if any. The batch it ends commits at once,
// not after the writer's delay.
func (db *DB) Flush(ctx context.Context) error { return db.w.flush(ctx) }

// OnCommit calls fn once every change made before it is committed (err
// nil) or has failed, on the writer's goroutine: fn must not block. It
// does not wait.
func (db *DB) OnCommit(fn func(err error)) error {
	return db.w.put(change{committed: fn})
}

// Err returns the writer's first error (sticky), or nil.
func (db *DB) Err() error { return db.w.failed() }
