package peerpb

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// memHost is a small in-memory shared state: one mailbox, versioned
// globals, one checkpoint.
type memHost struct {
	sdk.UnsupportedHost
	inbox   []sdk.Message
	globals map[string]sdk.Global
	state   []byte
}

func (h *memHost) Progress(context.Context, float64, string) error { return nil }
func (h *memHost) Partial(context.Context, []byte) error           { return nil }

func (h *memHost) Send(_ context.Context, to string, data []byte) error {
	if to == "" {
		return errors.New("no such task")
	}
	h.inbox = append(h.inbox, sdk.Message{From: "me", Data: data, Seq: uint64(len(h.inbox) + 1)})
	return nil
}

func (h *memHost) Recv(context.Context) (sdk.Message, error) {
	if len(h.inbox) == 0 {
		return sdk.Message{}, errors.New("empty")
	}
	m := h.inbox[0]
	h.inbox = h.inbox[1:]
	return m, nil
}

func (h *memHost) Load(_ context.Context, key string) (sdk.Global, error) { return h.globals[key], nil }

func (h *memHost) Store(_ context.Context, key string, value []byte) (sdk.Global, error) {
	g := sdk.Global{Version: h.globals[key].Version + 1, Value: value}
	h.globals[key] = g
	return g, nil
}

func (h *memHost) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	if h.globals[key].Version != version {
		return false, h.globals[key], nil
	}
	g, err := h.Store(ctx, key, value)
	return true, g, err
}

func (h *memHost) Checkpoint(_ context.Context, state []byte) error {
	h.state = state
	return nil
}

func (h *memHost) Resume(context.Context) ([]byte, bool, error) { return h.state, h.state != nil, nil }

// TestHostRoundTrip runs every shared-state call through HostClient, the
// HostCall encoding and ServeHost, as a peer's task and the coordinator do.
func TestHostRoundTrip(t *testing.T) {
	ctx := t.Context()
	server := &memHost{globals: map[string]sdk.Global{}}
	var ops []string
	c := HostClient{Call: func(ctx context.Context, c *HostCall) (*HostReply, error) {
		ops = append(ops, c.Op)
		return ServeHost(ctx, server, c), nil
	}}
	steps := []struct {
		name string
		do   func() error
	}{
		{"send", func() error { return c.Send(ctx, "t2", []byte("hi")) }},
		{"send fails with the host's error", func() error {
			if err := c.Send(ctx, "", nil); err == nil || err.Error() != "no such task" {
				return errors.New("want the host's error, got " + errString(err))
			}
			return nil
		}},
		{"recv", func() error {
			m, err := c.Recv(ctx)
			if err != nil || m.From != "me" || string(m.Data) != "hi" || m.Seq != 1 {
				return errors.New("bad message " + string(m.Data) + " " + errString(err))
			}
			return nil
		}},
		{"store then load", func() error {
			if g, err := c.Store(ctx, "k", []byte("v1")); err != nil || g.Version != 1 {
				return errors.New("store: " + errString(err))
			}
			g, err := c.Load(ctx, "k")
			if err != nil || g.Version != 1 || string(g.Value) != "v1" {
				return errors.New("load: " + errString(err))
			}
			return nil
		}},
		{"cas with a stale version fails and returns the current value", func() error {
			ok, g, err := c.CompareAndSwap(ctx, "k", 0, []byte("v2"))
			if err != nil || ok || g.Version != 1 || string(g.Value) != "v1" {
				return errors.New("cas: " + errString(err))
			}
			return nil
		}},
		{"cas with the current version swaps", func() error {
			ok, g, err := c.CompareAndSwap(ctx, "k", 1, []byte("v2"))
			if err != nil || !ok || g.Version != 2 || string(g.Value) != "v2" {
				return errors.New("cas: " + errString(err))
			}
			return nil
		}},
		{"resume before a checkpoint", func() error {
			if _, ok, err := c.Resume(ctx); err != nil || ok {
				return errors.New("resume: " + errString(err))
			}
			return nil
		}},
		{"checkpoint then resume", func() error {
			if err := c.Checkpoint(ctx, []byte("state")); err != nil {
				return err
			}
			st, ok, err := c.Resume(ctx)
			if err != nil || !ok || !bytes.Equal(st, []byte("state")) {
				return errors.New("resume: " + errString(err))
			}
			return nil
		}},
		{"an unknown op is unsupported", func() error {
			_, err := c.call(ctx, &HostCall{Op: "fly"})
			if !errors.Is(err, sdk.ErrUnsupported) {
				return errors.New("want ErrUnsupported, got " + errString(err))
			}
			return nil
		}},
		{"a transport error comes back as is", func() error {
			lost := errors.New("stream broke")
			bad := HostClient{Call: func(context.Context, *HostCall) (*HostReply, error) { return nil, lost }}
			if _, err := bad.Load(ctx, "k"); !errors.Is(err, lost) {
				return errors.New("want the transport error, got " + errString(err))
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	want := []string{OpSend, OpSend, OpRecv, OpStore, OpLoad, OpCAS, OpCAS, OpResume, OpCheckpoint, OpResume, "fly"}
	if len(ops) != len(want) {
		t.Fatalf("ops %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("ops %v, want %v", ops, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
