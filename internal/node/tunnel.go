package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// errCoordinatorGone: a task's host call cannot reach the coordinator
// any more (its session broke while the task ran).
var errCoordinatorGone = errors.New("the job's coordinator is gone")

// tunnelHost is the task's Host on a peer: a transport, not a second
// implementation. It relays the callbacks to the coordinator, whose own
// Host for the lease (the one the submitter's local slots use directly)
// answers them: progress and partial results as messages, the
// shared-state calls (messages between tasks, job-global variables,
// checkpoints) as HostCalls.
type tunnelHost struct {
	peerpb.HostClient // the shared-state calls, through call
	s                 *session
	id                uint64
}

var _ sdk.Host = (*tunnelHost)(nil)

func newTunnelHost(s *session, id uint64) *tunnelHost {
	h := &tunnelHost{s: s, id: id}
	h.Call = h.call
	return h
}

// call tunnels one Host call to the coordinator and waits for its reply.
func (h *tunnelHost) call(ctx context.Context, c *peerpb.HostCall) (*peerpb.HostReply, error) {
	s := h.s
	c.LeaseId = h.id
	ch := make(chan *peerpb.HostReply, 1)
	s.mu.Lock()
	s.nextCall++
	c.CallId = s.nextCall
	s.pending[c.CallId] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, c.CallId)
		s.mu.Unlock()
	}()
	select {
	case s.outbox <- &peerpb.FromPeer{Msg: &peerpb.FromPeer_Call{Call: c}}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.gone:
		return nil, errCoordinatorGone
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.gone:
		return nil, errCoordinatorGone
	}
}

// Checkpoint keeps a copy of the state in this node's block store too,
// then hands it to the coordinator, which keeps the copy a resume uses.
func (h *tunnelHost) Checkpoint(ctx context.Context, state []byte) error {
	if _, _, err := blocks.PutFile(ctx, h.s.n.store, bytes.NewReader(state), 0); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return h.HostClient.Checkpoint(ctx, state)
}

func (h *tunnelHost) Progress(ctx context.Context, fraction float64, note string) error {
	select {
	case h.s.outbox <- &peerpb.FromPeer{Msg: &peerpb.FromPeer_Progress{Progress: &peerpb.Progress{LeaseId: h.id, Fraction: fraction, Note: note}}}:
	default: // progress is advisory: drop it rather than stall the task
	}
	return nil
}

func (h *tunnelHost) Partial(ctx context.Context, data []byte) error {
	h.s.send(ctx, &peerpb.FromPeer{Msg: &peerpb.FromPeer_Partial{Partial: &peerpb.Partial{LeaseId: h.id, Data: data}}})
	return nil
}
