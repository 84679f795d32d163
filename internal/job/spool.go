package job

import (
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// spool keeps report.json's text of the tasks this run decided, encoded
// as their records leave memory (records.journaled), so that the run's
// end writes report.json from memory (spool.each) instead of reading
// every task back from the job database, and while the database commits
// its last changes and closes. It is bounded: past spoolBudget bytes, or
// for a job of more than spoolMaxTasks tasks, it is off, and report.json
// is read back from the database. All methods are called with the
// runner's lock (r.mu) held.
type spool struct {
	on bool
	// chunks hold the text, size bytes in all: chunks of spoolChunk
	// bytes (or one task's text, if longer), never one buffer that
	// grows: growing a buffer of tens of MiB copied it each time it
	// doubled (a tenth of the coordinator's CPU at 65,536 tasks).
	chunks [][]byte
	size   int
	// at is by task: where its text is (n 0: none).
	at []spoolRef
}

type spoolRef struct{ chunk, off, n uint32 }

// spoolChunk is the size of the spool's chunks; a chunk with less than
// spoolSlack bytes free is full.
const (
	spoolChunk = 1 << 20
	spoolSlack = 4 << 10
)

const (
	// spoolBudget bounds the spool's text: about 550 bytes per task of
	// one attempt, so every job up to spoolMaxTasks of such tasks keeps
	// one, and report.json is not read back from the database at the
	// run's end. The text holds no pointers: the collector never scans it.
	spoolBudget = 96 << 20
	// spoolMaxTasks: a larger job keeps no spool (its index alone would
	// be 8 bytes per task).
	spoolMaxTasks = 1 << 17
)

func newSpool(n int) *spool {
	if n > spoolMaxTasks {
		return &spool{}
	}
	return &spool{on: true, at: make([]spoolRef, n)}
}

// put encodes task i's record t, as the job database holds it.
func (s *spool) put(i int, t *report.Task) {
	if !s.on {
		return
	}
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < spoolSlack {
		s.chunks = append(s.chunks, make([]byte, 0, spoolChunk))
		last++
	}
	c := s.chunks[last]
	off := len(c)
	b, err := report.AppendTask(c, jobdb.AsStored(t))
	if err == nil {
		s.size += len(b) - off
	}
	if err != nil || s.size > spoolBudget {
		// The database's copy is read instead (and an error met again).
		s.on, s.chunks, s.at = false, nil, nil
		return
	}
	if cap(b) != cap(c) {
		// The text outgrew the chunk, which append copied into a larger
		// array: that is the chunk now, full (the next text starts one).
		b = b[:len(b):len(b)]
	}
	s.chunks[last] = b
	s.at[i] = spoolRef{uint32(last), uint32(off), uint32(len(b) - off)}
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
// covers.
func (s *spool) each(rs *records) func(yield func(raw []byte) error) error {
	return func(yield func(raw []byte) error) error {
		var b []byte
		for i, k := range rs.kind {
			var t *report.Task
			switch k {
			case recCold:
				ref := s.at[i]
				if err := yield(s.chunks[ref.chunk][ref.off : ref.off+ref.n]); err != nil {
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
