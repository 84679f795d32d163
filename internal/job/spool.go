package job

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// spool keeps report.json's text of the tasks this run decided, encoded
// as their records leave memory (records.journaled), so that the run's
// end writes report.json from the spool (spool.each) instead of reading
// every task back from the job database, and while the database commits
// its last changes and closes. The text is held in memory one chunk at a
// time: a full chunk is appended to the spool's file (an unlinked file in
// the output folder, made when the first chunk fills), so the spool holds
// at most about spoolChunk bytes of text in memory whatever the job's
// size (and 2 MiB more while each reads it back). For a job
// of more than spoolMaxTasks tasks it is off, and so it is after a write
// to its file fails or past 4 GiB of text: report.json is then read back
// from the database. All methods are called with the runner's lock
// (r.mu) held.
type spool struct {
	on  bool
	dir string // where the file is made
	// f holds the first spilled bytes of the text (nil: none yet); buf
	// holds the text after them, up to spoolChunk bytes (or one task's
	// text, if longer).
	f       *os.File
	spilled int64
	buf     []byte
	// at is by task: where its text is (n 0: none).
	at []spoolRef
	// read counts the bytes each read back from the file (its cost).
	read int64
}

// spoolRef is where a task's text is: off bytes into the whole text
// (the file's, then buf's); 8 bytes a task.
type spoolRef struct{ off, n uint32 }

// spoolChunk is the size of the spool's chunk in memory; a chunk with
// less than spoolSlack bytes free is full, and goes to the file.
const (
	spoolChunk = 1 << 20
	spoolSlack = 4 << 10
)

// spoolMaxTasks: a larger job keeps no spool (its index is 8 bytes per
// task: 8 MiB at a million tasks, where reading report.json back from
// the database instead takes a fifth of the run).
const spoolMaxTasks = 1 << 20

// newSpool is the spool of a job of n tasks whose file, if it needs one,
// is made in dir.
func newSpool(dir string, n int) *spool {
	if n > spoolMaxTasks {
		return &spool{}
	}
	return &spool{on: true, dir: dir, at: make([]spoolRef, n)}
}

// put encodes task i's record t, as the job database holds it.
func (s *spool) put(i int, t *report.Task) {
	if !s.on {
		return
	}
	if len(s.buf) > 0 && cap(s.buf)-len(s.buf) < spoolSlack {
		if err := s.spill(); err != nil {
			s.off()
			return
		}
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, spoolChunk)
	}
	off := len(s.buf)
	b, err := report.AppendTask(s.buf, jobdb.AsStored(t))
	if err != nil || s.spilled+int64(len(b)) > math.MaxUint32 {
		// The database's copy is read instead (and an error met again).
		s.off()
		return
	}
	s.at[i] = spoolRef{uint32(s.spilled + int64(off)), uint32(len(b) - off)}
	s.buf = b
	if cap(b) > spoolChunk {
		// The text outgrew the chunk, which append copied into a larger
		// array: it goes to the file now, and the next text starts a
		// chunk of the usual size.
		if err := s.spill(); err != nil {
			s.off()
			return
		}
		s.buf = nil
	}
}

// spill appends the chunk to the file, making the file first if need
// be, and empties the chunk.
func (s *spool) spill() error {
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, ".report-spool-*")
		if err != nil {
			return fmt.Errorf("report spool: %w", err)
		}
		// Unlinked at once: nothing is left behind, whatever ends the
		// run; the open file keeps the text until close.
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return fmt.Errorf("report spool: %w", err)
		}
		s.f = f
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("report spool: write %s: %w", s.f.Name(), err)
	}
	s.spilled += int64(len(s.buf))
	s.buf = s.buf[:0]
	return nil
}

// off turns the spool off: report.json is read back from the database.
func (s *spool) off() {
	s.close()
	s.on, s.buf, s.at = false, nil, nil
}

// close lets the file go (the spool is not read after it).
func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// covers says whether the spool holds every task whose record is in the
// job database only (cold): not when it is off, nor when the run reused
// tasks of an earlier run as they are.
func (s *spool) covers(rs *records) bool {
	if !s.on {
		return false
	}
	for i, k := range rs.kind {
		if k == recCold && s.at[i].n == 0 {
			return false
		}
	}
	return true
}

// each yields every task's text in task order (report.EncodeRaw): a
// cold one's from the spool, the others encoded from memory (a task in
// memory as it is, a task never tried as the spec gives it). It needs
// covers. The texts were spilled in the order their tasks were decided
// (the batches in flight at once in any order): in task order, the file
// is read through many short windows (spoolWindows of spoolWindow
// bytes, the least recently used one moved on a miss) that together
// cover the stretch of the file the tasks in flight went to.
func (s *spool) each(rs *records) func(yield func(raw []byte) error) error {
	return func(yield func(raw []byte) error) error {
		var b []byte
		var c spoolCache
		for i, k := range rs.kind {
			var t *report.Task
			switch k {
			case recCold:
				raw, err := s.text(s.at[i], &c)
				if err != nil {
					return err
				}
				if err := yield(raw); err != nil {
					return err
				}
				continue
			case recHot:
				t = rs.hot[i]
			default:
				t = rs.fresh(i)
			}
			var err error
			if b, err = report.AppendTask(b[:0], jobdb.AsStored(t)); err != nil {
				return err
			}
			if err := yield(b); err != nil {
				return err
			}
		}
		return nil
	}
}

// The windows each reads the file through: 2 MiB in all.
const (
	spoolWindows = 64
	spoolWindow  = 32 << 10
)

// spoolCache is each's windows over the file: win[j] holds the file's
// bytes from off[j] on (nil: none yet), used[j] says when it last served
// a text.
type spoolCache struct {
	win  [spoolWindows][]byte
	off  [spoolWindows]int64
	used [spoolWindows]int
	tick int
}

// text is the text at ref: from the chunk in memory, else from a window
// of c that holds it, else read from the file into the least recently
// used window, which is moved to the text.
func (s *spool) text(ref spoolRef, c *spoolCache) ([]byte, error) {
	off, n := int64(ref.off), int64(ref.n)
	if off >= s.spilled {
		o := off - s.spilled
		return s.buf[o : o+n], nil
	}
	c.tick++
	lru := 0
	for j := range c.win {
		if w := c.win[j]; w != nil && off >= c.off[j] && off+n <= c.off[j]+int64(len(w)) {
			c.used[j] = c.tick
			o := off - c.off[j]
			return w[o : o+n], nil
		}
		if c.win[lru] != nil && (c.win[j] == nil || c.used[j] < c.used[lru]) {
			lru = j
		}
	}
	// The window starts half its size before the text: the tasks next
	// to it were decided in any order, their texts on either side.
	start := max(0, off-spoolWindow/2)
	size := min(max(spoolWindow, off+n-start), s.spilled-start)
	w := c.win[lru]
	if int64(cap(w)) < size {
		w = make([]byte, max(size, spoolWindow))
	}
	w = w[:size]
	s.read += size
	if _, err := s.f.ReadAt(w, start); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("report spool: read %s: %w", s.f.Name(), err)
	}
	c.win[lru], c.off[lru], c.used[lru] = w, start, c.tick
	o := off - start
	return w[o : o+n], nil
}
