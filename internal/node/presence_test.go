package node

import (
	"testing"

	"github.com/p2pc/p2pc/discovery"
)

func TestPresenceFailed(t *testing.T) {
	ev := func(k discovery.EventKind, name string) discovery.Event {
		return discovery.Event{Kind: k, Member: discovery.Member{Meta: discovery.Meta{Name: name}}}
	}
	for _, c := range []struct {
		name   string
		events []discovery.Event
		failed bool
	}{
		{"never heard of", nil, false},
		{"declared failed", []discovery.Event{ev(discovery.Join, "p"), ev(discovery.Dead, "p")}, true},
		{"failed, then back", []discovery.Event{ev(discovery.Dead, "p"), ev(discovery.Join, "p")}, false},
		{"failed, then left", []discovery.Event{ev(discovery.Dead, "p"), ev(discovery.Leave, "p")}, false},
		{"another member failed", []discovery.Event{ev(discovery.Dead, "q")}, false},
		{"an update does not revive", []discovery.Event{ev(discovery.Dead, "p"), ev(discovery.Update, "p")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Presence{failed: map[string]bool{}}
			for _, e := range c.events {
				p.note(e)
			}
			if got := p.Failed("p"); got != c.failed {
				t.Errorf("Failed(p) = %v, want %v", got, c.failed)
			}
		})
	}
}
