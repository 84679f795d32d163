package swarmsim

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/trust"
)

// Swarm is a set of light peers serving on loopback.
type Swarm struct {
	peers []*peer
	wg    sync.WaitGroup
	quiet chan struct{} // the silent peers' (silence); nil: none
}

// StartSwarm starts n light peers of the swarm of secret s, each with
// slots slots whose tasks wait task and return nothing; each write of a
// peer waits latency first (0: none).
func StartSwarm(s trust.Secret, n, slots int, task, latency time.Duration, log *slog.Logger) (*Swarm, error) {
	if n < 1 || slots < 1 {
		return nil, fmt.Errorf("swarmsim: %d peers of %d slots: want at least 1 of each", n, slots)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sw := &Swarm{}
	for i := range n {
		p, err := newPeer(s, fmt.Sprintf("sim-%04d", i), slots, task, latency, log)
		if err != nil {
			sw.Close()
			return nil, err
		}
		sw.peers = append(sw.peers, p)
		sw.wg.Add(1)
		go func() {
			defer sw.wg.Done()
			p.serve()
		}()
	}
	return sw, nil
}

// silence makes the last n peers answer no Info call until speak; it is
// called before the peers are asked anything.
func (sw *Swarm) silence(n int) {
	ch := make(chan struct{})
	sw.quiet = ch
	for _, p := range sw.peers[len(sw.peers)-min(n, len(sw.peers)):] {
		p.silent.Store(&ch)
	}
}

// speak ends the silence once every other peer got its Hello, and says
// whether it has ended.
func (sw *Swarm) speak() bool {
	if sw.quiet == nil {
		return true
	}
	select {
	case <-sw.quiet:
		return true
	default:
	}
	for _, p := range sw.peers {
		if p.silent.Load() == nil && p.firstHello.Load() == 0 {
			return false
		}
	}
	close(sw.quiet)
	return true
}

// gaveUp is when the coordinator first gave up an Info call to a silent
// peer (zero: never).
func (sw *Swarm) gaveUp() time.Time {
	var first time.Time
	for _, p := range sw.peers {
		if ns := p.gaveUp.Load(); ns != 0 && (first.IsZero() || time.Unix(0, ns).Before(first)) {
			first = time.Unix(0, ns)
		}
	}
	return first
}

// lastHello is when the last peer that was not silent got its first
// Hello (zero if one got none).
func (sw *Swarm) lastHello() time.Time {
	var last time.Time
	for _, p := range sw.peers {
		if p.silent.Load() != nil {
			continue
		}
		ns := p.firstHello.Load()
		if ns == 0 {
			return time.Time{}
		}
		if t := time.Unix(0, ns); t.After(last) {
			last = t
		}
	}
	return last
}

// Addrs are the peers' gRPC addresses (host:port), for p2pc run --join.
func (sw *Swarm) Addrs() []string {
	out := make([]string, len(sw.peers))
	for i, p := range sw.peers {
		out[i] = p.addr
	}
	return out
}

// Leased counts the peers that got a lease, and returns the time the
// last of them got its first (zero if none did).
func (sw *Swarm) Leased() (n int, last time.Time) {
	for _, p := range sw.peers {
		if ns := p.firstLease.Load(); ns != 0 {
			n++
			if t := time.Unix(0, ns); t.After(last) {
				last = t
			}
		}
	}
	return n, last
}

// firstLeases are the times from start to each peer's first lease, in
// order (the peers without one left out).
func (sw *Swarm) firstLeases(start time.Time) []time.Duration {
	return sw.since(start, func(p *peer) int64 { return p.firstLease.Load() })
}

// firstHellos are the times from start to each peer's first Hello (the
// coordinator's job offer), in order.
func (sw *Swarm) firstHellos(start time.Time) []time.Duration {
	return sw.since(start, func(p *peer) int64 { return p.firstHello.Load() })
}

// since are the times from start to each peer's at (unix nanoseconds, 0:
// none), in order.
func (sw *Swarm) since(start time.Time, at func(*peer) int64) []time.Duration {
	var out []time.Duration
	for _, p := range sw.peers {
		if ns := at(p); ns != 0 {
			out = append(out, time.Unix(0, ns).Sub(start))
		}
	}
	slices.Sort(out)
	return out
}

// Unleased names the peers that got no lease yet (at most max of them).
func (sw *Swarm) Unleased(max int) []string {
	var out []string
	for _, p := range sw.peers {
		if p.firstLease.Load() == 0 && len(out) < max {
			out = append(out, p.name)
		}
	}
	return out
}

// Span is the busy part of the peers' work: from the first lease any
// peer got to the last result any peer sent (zero without results).
func (sw *Swarm) Span() (first, last time.Time) {
	for _, p := range sw.peers {
		if ns := p.firstLease.Load(); ns != 0 && (first.IsZero() || time.Unix(0, ns).Before(first)) {
			first = time.Unix(0, ns)
		}
		if ns := p.lastResult.Load(); ns != 0 && time.Unix(0, ns).After(last) {
			last = time.Unix(0, ns)
		}
	}
	return first, last
}

// Tasks is how many results the peers sent.
func (sw *Swarm) Tasks() int64 {
	var n int64
	for _, p := range sw.peers {
		n += p.tasks.Load()
	}
	return n
}

// Err joins the errors the peers met (their first few each).
func (sw *Swarm) Err() error {
	var errs []error
	for _, p := range sw.peers {
		if err := p.errs.err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every peer (their sessions end at once) and waits for them.
func (sw *Swarm) Close() {
	for _, p := range sw.peers {
		p.srv.Stop()
	}
	sw.wg.Wait()
}
