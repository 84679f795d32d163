package job

import (
	"slices"
	"testing"
)

// TestDurableWaitsForReplicas: with successors, a pass is durable (and
// its results acknowledged) only once it is committed and replicated.
func TestDurableWaitsForReplicas(t *testing.T) {
	var plain, swarm durability
	swarm.replicas = true
	for _, d := range []*durability{&plain, &swarm} {
		d.reached(5)
		d.replicatedTo(3)
	}
	if got := plain.durableTo(); got != 5 {
		t.Errorf("without successors: durable to %d, want 5", got)
	}
	if got := swarm.durableTo(); got != 3 {
		t.Errorf("with successors: durable to %d, want 3 (replicated)", got)
	}
	moved := swarm.watch()
	swarm.replicatedTo(7)
	select {
	case <-moved:
	default:
		t.Error("replicating did not wake the acks")
	}
	if got := swarm.durableTo(); got != 5 {
		t.Errorf("replicated beyond committed: durable to %d, want 5 (committed)", got)
	}
}

func TestDeparted(t *testing.T) {
	got := departed([]string{"a@1", "b@2", "c@3"}, []string{"b"})
	if !slices.Equal(got, []string{"a@1", "c@3"}) {
		t.Errorf("departed: %v", got)
	}
}
