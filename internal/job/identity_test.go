package job

import (
	"testing"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// One node ID is one worker: a second name proving it waits until the
// first's session ends, and then enrols as the same worker.
func TestIdentitiesOneWorkerPerID(t *testing.T) {
	var ids identities
	w, ok := ids.claim("liar", "ID1")
	if !ok || w != "liar@ID1" {
		t.Fatalf("claim(liar) = %q, %v", w, ok)
	}
	if other, ok := ids.claim("ghost", "ID1"); ok || other != "liar" {
		t.Fatalf("claim(ghost) while liar's session is open = %q, %v; want a refusal naming liar", other, ok)
	}
	if w, ok := ids.claim("honest", "ID2"); !ok || w != "honest@ID2" {
		t.Fatalf("claim(honest) = %q, %v", w, ok)
	}
	ids.release("ID1")
	if w, ok := ids.claim("ghost", "ID1"); !ok || w != "liar@ID1" {
		t.Fatalf("claim(ghost) after liar's session = %q, %v; want the worker liar@ID1", w, ok)
	}
	if !peerpb.RefusalPasses(busyID("ghost", "ID1", "liar").Reason) {
		t.Error("the refusal of a busy ID does not pass: the peer would never be asked again")
	}
	if peerpb.RefusalPasses(forgedID("ghost", "ID9", "ID1").Reason) {
		t.Error("the refusal of a forged gossiped ID passes")
	}
	if ids.first("ghost@ID1") != true || ids.first("ghost@ID1") != false {
		t.Error("a refusal is not told once")
	}
}
