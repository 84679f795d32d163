package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/transfer"
)

// Candidate is a peer that might take a job's tasks.
type Candidate struct {
	Name string
	Addr string // gRPC
	// Slots > 0 and a compatible protocol: the peer takes work.
	Slots      int
	Compatible bool
	OS, Arch   string
}

// Members supplies the live peers of the swarm (the gossip membership).
type Members interface {
	// Candidates returns the peers currently alive.
	Candidates() []Candidate
	// Changed returns a channel that is closed at the next change.
	Changed() <-chan struct{}
}

// Swarm enrols peers into a job: the live members of the membership, and
// static addresses (--join) whose Info is asked. A peer that vanishes from
// the membership has its session ended at once, so its leases are
// requeued; a static peer that cannot be reached is retried.
type Swarm struct {
	Self    string // this node's name: never enrolled
	Static  []string
	Members Members // may be nil
	Conns   *transfer.Pool
	Logger  *slog.Logger
	// Retry is the wait before enrolling a peer again after its session
	// failed (default 1s).
	Retry time.Duration
}

type enrolment struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Serve enrols peers into the job jobID until ctx ends: enrol runs one
// peer's work session (job.Swarm, which this type implements).
func (sw *Swarm) Serve(ctx context.Context, jobID, goos, goarch string, enrol func(ctx context.Context, name, addr string, client peerpb.PeerClient) error) {
	log := sw.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "swarm", "job", short(jobID))
	retry := sw.Retry
	if retry <= 0 {
		retry = time.Second
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	active := map[string]*enrolment{} // by peer name
	refused := map[string]bool{}
	failedAt := map[string]time.Time{}
	var mu sync.Mutex                  // guards refused, failedAt
	staticNames := map[string]string{} // addr -> name, once known

	tick := time.NewTicker(retry / 2)
	defer tick.Stop()
	for {
		var changed <-chan struct{}
		want := map[string]Candidate{}
		if sw.Members != nil {
			changed = sw.Members.Changed()
			for _, c := range sw.Members.Candidates() {
				if c.Name == sw.Self || c.Slots <= 0 || !c.Compatible || c.Addr == "" {
					continue
				}
				if c.OS != "" && (c.OS != goos || c.Arch != goarch) {
					continue
				}
				want[c.Name] = c
			}
		}
		for _, addr := range sw.Static {
			name, ok := staticNames[addr]
			if !ok {
				info, err := sw.info(ctx, addr)
				if err != nil {
					continue
				}
				name = info.Name
				staticNames[addr] = name
			}
			if _, ok := want[name]; !ok && name != sw.Self {
				want[name] = Candidate{Name: name, Addr: addr, Slots: 1, Compatible: true}
			}
		}
		// End the sessions of peers that are gone.
		for name, e := range active {
			select {
			case <-e.done:
				delete(active, name)
				continue
			default:
			}
			if _, ok := want[name]; !ok {
				log.Info("peer left the swarm; ending its session", "peer", name)
				e.cancel()
				delete(active, name)
			}
		}
		// Enrol the new ones.
		mu.Lock()
		for name, c := range want {
			if active[name] != nil || refused[name] || time.Since(failedAt[name]) < retry {
				continue
			}
			conn, err := sw.Conns.Conn(c.Addr)
			if err != nil {
				failedAt[name] = time.Now()
				continue
			}
			ectx, cancel := context.WithCancel(ctx)
			e := &enrolment{cancel: cancel, done: make(chan struct{})}
			active[name] = e
			wg.Add(1)
			go func(c Candidate) {
				defer wg.Done()
				defer close(e.done)
				defer cancel()
				err := enrol(ectx, c.Name, c.Addr, peerpb.NewPeerClient(conn))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, peerpb.ErrRefused):
					refused[c.Name] = true
				case err != nil:
					log.Info("peer session ended", "peer", c.Name, "err", err)
					failedAt[c.Name] = time.Now()
				}
			}(c)
		}
		mu.Unlock()

		select {
		case <-ctx.Done():
			for _, e := range active {
				e.cancel()
			}
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func (sw *Swarm) info(ctx context.Context, addr string) (*peerpb.InfoResponse, error) {
	conn, err := sw.Conns.Conn(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return peerpb.NewPeerClient(conn).Info(ctx, &peerpb.InfoRequest{Proto: ProtocolVersion})
}
