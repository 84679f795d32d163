package sched

import (
	"slices"
	"testing"
)

// TestPendingList: the pending list keeps its order through takes from
// the front and the middle, pushes to both ends and removals, and its
// flags say exactly which tasks are in it.
func TestPendingList(t *testing.T) {
	type op struct {
		kind string // "take" (position), "front", "back", "remove" (task)
		n    int
	}
	cases := []struct {
		name string
		ops  []op
		want []int
	}{
		{"take first", []op{{"take", 0}, {"take", 0}}, []int{2, 3, 4}},
		{"take middle", []op{{"take", 2}}, []int{0, 1, 3, 4}},
		{"back after take", []op{{"take", 0}, {"back", 0}}, []int{1, 2, 3, 4, 0}},
		{"front after take", []op{{"take", 0}, {"take", 0}, {"front", 1}, {"front", 0}}, []int{0, 1, 2, 3, 4}},
		{"push of a queued task is a no-op", []op{{"back", 2}, {"front", 4}}, []int{0, 1, 2, 3, 4}},
		{"remove", []op{{"remove", 3}, {"remove", 0}, {"remove", 3}}, []int{1, 2, 4}},
		{"remove then back", []op{{"remove", 1}, {"back", 1}}, []int{0, 2, 3, 4, 1}},
		{"drain and refill", []op{{"take", 0}, {"take", 0}, {"take", 0}, {"take", 0}, {"take", 0}, {"back", 3}, {"front", 2}}, []int{2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &Queue{pending: []int{0, 1, 2, 3, 4}, tasks: make([]taskState, 5)}
			for i := range q.tasks {
				q.tasks[i].queued = true
			}
			for _, o := range c.ops {
				switch o.kind {
				case "take":
					q.unqueueAtLocked(o.n)
				case "front":
					q.enqueueLocked(o.n, true)
				case "back":
					q.enqueueLocked(o.n, false)
				case "remove":
					q.unqueueLocked(o.n)
				}
			}
			if !slices.Equal(q.pending, c.want) {
				t.Fatalf("pending = %v, want %v", q.pending, c.want)
			}
			for i := range q.tasks {
				if in := slices.Contains(c.want, i); q.tasks[i].queued != in {
					t.Errorf("task %d: queued = %v, in the list: %v", i, q.tasks[i].queued, in)
				}
			}
		})
	}
}
