package job

import (
	"fmt"
	"net"
	"sync"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// identities holds, for one job, the node IDs that peers' handshakes
// proved: each ID is one worker, named by the first name it enrolled
// under ("name@id"), with at most one session at a time. Votes, replicas,
// strikes and exclusions go by that worker, so a member that gossips
// itself under several names is still one voter.
type identities struct {
	mu     sync.Mutex
	byID   map[string]*identity
	warned map[string]bool // "name@id" pairs whose refusal was logged
}

type identity struct {
	worker string // name@id, from the first enrolment
	active string // the name whose session is open, "" for none
}

// claim opens a session of the peer name proving node ID id: it returns
// the worker's name, or, if another name proving id has a session open,
// that name and ok false.
func (ids *identities) claim(name, id string) (worker string, ok bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.byID == nil {
		ids.byID = map[string]*identity{}
	}
	it := ids.byID[id]
	if it == nil {
		it = &identity{worker: name + "@" + id}
		ids.byID[id] = it
	}
	if it.active != "" {
		return it.active, false
	}
	it.active = name
	return it.worker, true
}

// release ends the session of node ID id.
func (ids *identities) release(id string) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if it := ids.byID[id]; it != nil {
		it.active = ""
	}
}

// first reports whether the refusal of key is told for the first time
// (then it is logged as a warning, later ones at debug level).
func (ids *identities) first(key string) bool {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.warned == nil {
		ids.warned = map[string]bool{}
	}
	if ids.warned[key] {
		return false
	}
	ids.warned[key] = true
	return true
}

// hostOf is the host part of a peer's address as the coordinator dials
// it (an IP address in its canonical form; a name as it is).
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// busyID is the refusal of a second enrolment, as name, proving a node
// ID that has a session open as other.
func busyID(name, id, other string) *peerpb.RefusedError {
	return &peerpb.RefusedError{Reason: fmt.Sprintf("%s%s proves node ID %.12s, which has a session as %s: one node, one worker", peerpb.RefuseBusyID, name, id, other)}
}

// forgedID is the refusal of a peer that gossips another node ID than
// the one its handshake proved.
func forgedID(name, claimed, proved string) *peerpb.RefusedError {
	return &peerpb.RefusedError{Reason: fmt.Sprintf("%s gossips node ID %.12s, but its handshake proved %.12s", name, claimed, proved)}
}
