package node

import "testing"

func TestEpochFence(t *testing.T) {
	var f epochFence
	steps := []struct {
		job    string
		run    string
		epoch  uint64
		coord  string
		admits bool
	}{
		{"j", "r", 0, "b", true},  // not a swarm job: never fenced
		{"j", "r", 1, "b", true},  // the first owner
		{"j", "r", 2, "c", true},  // a takeover
		{"j", "r", 1, "b", false}, // the old owner comes back
		{"j", "r", 0, "b", true},  // epoch 0 stays unfenced
		{"j", "r", 2, "c", true},  // the owner again
		{"j", "r", 2, "d", false}, // a second owner of epoch 2, higher node ID
		{"j", "r", 2, "a", true},  // one of a lower node ID wins the tie
		{"j", "r", 2, "c", false}, // and the first is now fenced off
		{"k", "r", 1, "z", true},  // another job is apart
		{"j", "r", 3, "z", true},
		{"j", "s", 1, "y", true},  // a later run of the job, from another node
		{"j", "s", 1, "x", true},  // (a tie of its own)
		{"j", "s", 1, "y", false}, // fenced within its run
		{"j", "r", 2, "a", false}, // the first run's fence stands
	}
	for i, s := range steps {
		if got := f.admit(s.job, s.run, s.epoch, s.coord) == ""; got != s.admits {
			t.Errorf("step %d: admit(%s, %s, %d, %s) = %v, want %v", i, s.job, s.run, s.epoch, s.coord, got, s.admits)
		}
	}
}
