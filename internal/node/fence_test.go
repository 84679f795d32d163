package node

import "testing"

func TestEpochFence(t *testing.T) {
	var f epochFence
	steps := []struct {
		job    string
		epoch  uint64
		coord  string
		admits bool
	}{
		{"j", 0, "b", true},  // not a swarm job: never fenced
		{"j", 1, "b", true},  // the first owner
		{"j", 2, "c", true},  // a takeover
		{"j", 1, "b", false}, // the old owner comes back
		{"j", 0, "b", true},  // epoch 0 stays unfenced
		{"j", 2, "c", true},  // the owner again
		{"j", 2, "d", false}, // a second owner of epoch 2, higher node ID
		{"j", 2, "a", true},  // one of a lower node ID wins the tie
		{"j", 2, "c", false}, // and the first is now fenced off
		{"k", 1, "z", true},  // another job is apart
		{"j", 3, "z", true},
	}
	for i, s := range steps {
		if got := f.admit(s.job, s.epoch, s.coord) == ""; got != s.admits {
			t.Errorf("step %d: admit(%s, %d, %s) = %v, want %v", i, s.job, s.epoch, s.coord, got, s.admits)
		}
	}
}
