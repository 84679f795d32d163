package jobdb

// taskRows is what the database holds of one task, as far as the writer
// knows.
type taskRows struct {
	seen bool // the entry is set up
	row  bool // this writer wrote the task's row
	// Rows of attempts, votes and partial results; -1: unknown (rows of
	// an earlier run may be there).
	attempts, votes, partials int32
}

// rowsTable keeps a taskRows per task index in 4 bytes (a job of a
// million tasks: 4 MB, not 16), packed (packRows); the rare entry whose
// counts do not fit is kept whole in big.
type rowsTable struct {
	packed []uint32
	big    map[int]taskRows
}

// A packed entry: bit 31 seen, bit 30 row, then three fields of
// rowsBits bits, each a count plus one (0: -1, unknown), attempts in the
// lowest. All three fields at rowsBig: the entry is in big. 0: never set
// (the writer sets only entries it has seen).
const (
	rowsBits        = 10
	rowsMask        = 1<<rowsBits - 1
	rowsBig         = rowsMask
	rowsSeen uint32 = 1 << 31
	rowsRow  uint32 = 1 << 30
	rowsAll  uint32 = rowsBig | rowsBig<<rowsBits | rowsBig<<(2*rowsBits)
)

// get is entry idx (the zero taskRows if it was never set).
func (t *rowsTable) get(idx int) taskRows {
	if idx >= len(t.packed) || t.packed[idx] == 0 {
		return taskRows{}
	}
	p := t.packed[idx]
	if p&rowsAll == rowsAll {
		return t.big[idx]
	}
	field := func(n int) int32 { return int32(p>>(n*rowsBits)&rowsMask) - 1 }
	return taskRows{seen: p&rowsSeen != 0, row: p&rowsRow != 0, attempts: field(0), votes: field(1), partials: field(2)}
}

// set makes entry idx r, growing the table.
func (t *rowsTable) set(idx int, r taskRows) {
	if idx >= len(t.packed) {
		t.packed = append(t.packed, make([]uint32, idx+1-len(t.packed))...)
	}
	delete(t.big, idx)
	var p uint32
	if r.seen {
		p |= rowsSeen
	}
	if r.row {
		p |= rowsRow
	}
	for n, c := range []int32{r.attempts, r.votes, r.partials} {
		if c < -1 || c >= rowsBig-1 {
			if t.big == nil {
				t.big = map[int]taskRows{}
			}
			t.big[idx] = r
			t.packed[idx] = rowsAll
			return
		}
		p |= uint32(c+1) << (n * rowsBits)
	}
	t.packed[idx] = p
}
