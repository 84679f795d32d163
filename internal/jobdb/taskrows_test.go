package jobdb

import "testing"

// TestRowsTable: every entry reads back as it was set, whether it packs
// into 4 bytes or is kept whole (a count past the packed fields), and an
// entry set again in the other form reads back as the new one.
func TestRowsTable(t *testing.T) {
	cases := []taskRows{
		{},
		{seen: true, attempts: -1, votes: -1, partials: -1},
		{seen: true, row: true, attempts: 1},
		{seen: true, row: true, attempts: 1021, votes: 1021, partials: 1021},
		{seen: true, row: true, attempts: 1022, votes: 0, partials: 0},
		{seen: true, attempts: 3, votes: 70000, partials: -1},
		{seen: true, row: true, attempts: -1, votes: 2, partials: 1 << 30},
		{row: true, attempts: 0, votes: 0, partials: 1022},
	}
	var tab rowsTable
	for i, c := range cases {
		tab.set(3*i, c)
	}
	for i, c := range cases {
		if got := tab.get(3 * i); got != c {
			t.Errorf("entry %d: got %+v, want %+v", 3*i, got, c)
		}
		if got := tab.get(3*i + 1); got != (taskRows{}) {
			t.Errorf("entry %d, never set: got %+v", 3*i+1, got)
		}
	}
	if got := tab.get(1 << 20); got != (taskRows{}) {
		t.Errorf("past the end: got %+v", got)
	}
	if len(tab.big) != 4 {
		t.Errorf("%d entries kept whole, want the 4 that do not pack", len(tab.big))
	}
	// The other way round: packed entries set whole and whole ones packed.
	for i, c := range cases {
		tab.set(3*i, cases[len(cases)-1-i])
		if got := tab.get(3 * i); got != cases[len(cases)-1-i] {
			t.Errorf("entry %d set again: got %+v, want %+v (was %+v)", 3*i, got, cases[len(cases)-1-i], c)
		}
	}
	if len(tab.big) != 4 {
		t.Errorf("%d entries kept whole after setting again, want 4", len(tab.big))
	}
}
