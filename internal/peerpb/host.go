package peerpb

import (
	"context"
	"errors"
	"fmt"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// The shared-state calls of a task's sdk.Host travel between a peer and
// the coordinator as HostCall / HostReply messages on the Work stream.
// Both ends of that encoding are here: HostClient on the peer, ServeHost
// on the coordinator.

// HostClient is the shared-state half of a task's sdk.Host on a peer
// (messages between tasks, job-global variables, checkpoints): each call
// becomes a HostCall that Call delivers to the coordinator, whose reply
// it waits for. Progress and Partial are the embedder's.
type HostClient struct {
	Call func(ctx context.Context, c *HostCall) (*HostReply, error)
}

// call sends c and turns a reply's failure into an error.
func (h HostClient) call(ctx context.Context, c *HostCall) (*HostReply, error) {
	r, err := h.Call(ctx, c)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Unsupported:
		return nil, fmt.Errorf("%s: %w", c.Op, sdk.ErrUnsupported)
	case r.Error != "":
		return nil, errors.New(r.Error)
	}
	return r, nil
}

func (h HostClient) Send(ctx context.Context, to string, data []byte) error {
	_, err := h.call(ctx, &HostCall{Op: OpSend, To: to, Data: data})
	return err
}

func (h HostClient) Recv(ctx context.Context) (sdk.Message, error) {
	r, err := h.call(ctx, &HostCall{Op: OpRecv})
	if err != nil {
		return sdk.Message{}, err
	}
	return sdk.Message{From: r.From, Data: r.Value, Seq: r.Seq}, nil
}

func (h HostClient) global(ctx context.Context, c *HostCall) (bool, sdk.Global, error) {
	r, err := h.call(ctx, c)
	if err != nil {
		return false, sdk.Global{}, err
	}
	return r.Ok, sdk.Global{Version: r.Version, Value: r.Value}, nil
}

func (h HostClient) Load(ctx context.Context, key string) (sdk.Global, error) {
	_, g, err := h.global(ctx, &HostCall{Op: OpLoad, Key: key})
	return g, err
}

func (h HostClient) Store(ctx context.Context, key string, value []byte) (sdk.Global, error) {
	_, g, err := h.global(ctx, &HostCall{Op: OpStore, Key: key, Data: value})
	return g, err
}

func (h HostClient) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	return h.global(ctx, &HostCall{Op: OpCAS, Key: key, Version: version, Data: value})
}

func (h HostClient) Checkpoint(ctx context.Context, state []byte) error {
	_, err := h.call(ctx, &HostCall{Op: OpCheckpoint, Data: state})
	return err
}

func (h HostClient) Resume(ctx context.Context) ([]byte, bool, error) {
	r, err := h.call(ctx, &HostCall{Op: OpResume})
	if err != nil {
		return nil, false, err
	}
	return r.Value, r.Ok, nil
}

// ServeHost answers a peer's HostCall c with the lease's own Host h (the
// one a local slot's task uses directly).
func ServeHost(ctx context.Context, h sdk.Host, c *HostCall) *HostReply {
	reply := &HostReply{CallId: c.CallId}
	var err error
	switch c.Op {
	case OpSend:
		err = h.Send(ctx, c.To, c.Data)
	case OpRecv:
		var m sdk.Message
		if m, err = h.Recv(ctx); err == nil {
			reply.From, reply.Value, reply.Seq = m.From, m.Data, m.Seq
		}
	case OpLoad, OpStore, OpCAS:
		var g sdk.Global
		switch c.Op {
		case OpLoad:
			g, err = h.Load(ctx, c.Key)
		case OpStore:
			g, err = h.Store(ctx, c.Key, c.Data)
		default:
			reply.Ok, g, err = h.CompareAndSwap(ctx, c.Key, c.Version, c.Data)
		}
		reply.Version, reply.Value = g.Version, g.Value
	case OpCheckpoint:
		err = h.Checkpoint(ctx, c.Data)
	case OpResume:
		reply.Value, reply.Ok, err = h.Resume(ctx)
	default:
		reply.Unsupported = true
		err = fmt.Errorf("unknown host call %q", c.Op)
	}
	if err != nil {
		reply.Error = err.Error()
	}
	return reply
}
