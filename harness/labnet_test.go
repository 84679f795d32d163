package harness

import (
	"fmt"
	"os"
	"testing"
)

func TestOwnerAlive(t *testing.T) {
	self := os.Getpid()
	for name, want := range map[string]bool{
		fmt.Sprintf("p2pcb-%d-3", self):     true,
		fmt.Sprintf("p2pcb-%d-3-hub", self): true,
		"p2pcb-999999999-1":                 false, // no such process
		"p2pcb-999999999-1-p2":              false,
		"p2pcb-qout":                        true, // not a lab object: never touched
		"p2pcb-final":                       true,
		"p2pcb-12-x":                        true,
		"other-999999999-1":                 true,
	} {
		if got := ownerAlive(name); got != want {
			t.Errorf("ownerAlive(%q) = %v, want %v", name, got, want)
		}
	}
}
