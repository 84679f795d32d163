package vc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
)

func newState(t *testing.T, store func(context.Context, []byte) error) *State {
	t.Helper()
	var keep func(context.Context, []byte) (string, error)
	if store != nil {
		keep = func(ctx context.Context, data []byte) (string, error) { return "block", store(ctx, data) }
	}
	return New([]string{"a", "b"}, keep, nil)
}

func cursor(task string) (*Cursor, func()) {
	ch := make(chan struct{})
	return NewCursor(task, ch), func() { close(ch) }
}

func TestMessages(t *testing.T) {
	v := newState(t, nil)
	a, _ := cursor("a")
	b, _ := cursor("b")
	for _, c := range []struct {
		to, data string
		err      string
	}{
		{"b", "one", ""},
		{"b", "two", ""},
		{"a", "to self", ""},
		{"nobody", "x", "no such task"},
		{"b", strings.Repeat("x", sdk.MaxMessageSize+1), "over the"},
	} {
		err := v.Send(a, c.to, []byte(c.data))
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Send(%s, %.10q) = %v, want %q", c.to, c.data, err, c.err)
		}
	}
	for i, want := range []string{"one", "two"} {
		m, err := v.Recv(t.Context(), b)
		if err != nil || m.From != "a" || string(m.Data) != want || m.Seq != uint64(i+1) {
			t.Errorf("Recv = %+v, %v; want %q from a, seq %d", m, err, want, i+1)
		}
	}
	// A second attempt of b reads its mailbox from the start.
	b2, _ := cursor("b")
	if m, _ := v.Recv(t.Context(), b2); string(m.Data) != "one" {
		t.Errorf("a new attempt got %q first", m.Data)
	}
}

func TestRecvWaitsAndEnds(t *testing.T) {
	v := newState(t, nil)
	b, revoke := cursor("b")
	got := make(chan sdk.Message, 1)
	go func() {
		m, _ := v.Recv(context.Background(), b)
		got <- m
	}()
	a, _ := cursor("a")
	if err := v.Send(a, "b", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m := <-got; string(m.Data) != "hi" {
		t.Errorf("got %q", m.Data)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := v.Recv(context.Background(), b)
		errc <- err
	}()
	revoke()
	if err := <-errc; !errors.Is(err, ErrRevoked) {
		t.Errorf("Recv on a revoked lease: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b2, _ := cursor("b")
	b2.consumed = 1
	if _, err := v.Recv(ctx, b2); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv with a canceled context: %v", err)
	}
}

func TestGlobals(t *testing.T) {
	type op struct {
		kind    string // load, store, cas
		key     string
		version uint64
		value   string
		ok      bool
		want    sdk.Global
		err     string
	}
	g := func(v uint64, s string) sdk.Global { return sdk.Global{Version: v, Value: []byte(s)} }
	for _, c := range []struct {
		name string
		ops  []op
	}{
		{"unset loads as version 0", []op{{kind: "load", key: "k", want: sdk.Global{}}}},
		{"store bumps the version", []op{
			{kind: "store", key: "k", value: "1", want: g(1, "1")},
			{kind: "store", key: "k", value: "2", want: g(2, "2")},
			{kind: "load", key: "k", want: g(2, "2")},
		}},
		{"cas at the version wins, a stale one loses", []op{
			{kind: "cas", key: "k", version: 0, value: "a", ok: true, want: g(1, "a")},
			{kind: "cas", key: "k", version: 0, value: "b", ok: false, want: g(1, "a")},
			{kind: "cas", key: "k", version: 1, value: "c", ok: true, want: g(2, "c")},
		}},
		{"bad keys", []op{
			{kind: "load", key: "", err: "want 1 to"},
			{kind: "store", key: strings.Repeat("k", MaxKeyLen+1), err: "want 1 to"},
			{kind: "cas", key: "\xff", err: "want 1 to"},
		}},
		{"value too large", []op{{kind: "store", key: "k", value: strings.Repeat("v", sdk.MaxGlobalSize+1), err: "over the"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newState(t, nil)
			cur, _ := cursor("a")
			for i, o := range c.ops {
				var got sdk.Global
				var ok bool
				var err error
				switch o.kind {
				case "load":
					got, err = v.Load(cur, o.key)
				case "store":
					got, err = v.Store(cur, o.key, []byte(o.value))
					ok = err == nil
				case "cas":
					ok, got, err = v.CompareAndSwap(cur, o.key, o.version, []byte(o.value))
				}
				if o.err != "" {
					if err == nil || !strings.Contains(err.Error(), o.err) {
						t.Errorf("op %d: err %v, want %q", i, err, o.err)
					}
					continue
				}
				if err != nil || got.Version != o.want.Version || !bytes.Equal(got.Value, o.want.Value) || (o.kind == "cas" && ok != o.ok) {
					t.Errorf("op %d %s: %v %+v %v, want %v %+v", i, o.kind, ok, got, err, o.ok, o.want)
				}
			}
		})
	}
}

// TestReplayAppliesOnce: a second attempt of a task repeats the first's
// operations and gets the recorded results; nothing is applied twice.
func TestReplayAppliesOnce(t *testing.T) {
	v := newState(t, nil)
	first, _ := cursor("a")
	if _, err := v.Store(first, "n", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := v.Send(first, "b", []byte("m")); err != nil {
		t.Fatal(err)
	}
	other, _ := cursor("b")
	if _, err := v.Store(other, "n", []byte("other")); err != nil { // version 2
		t.Fatal(err)
	}
	again, _ := cursor("a")
	g, _ := v.Store(again, "n", []byte("1"))
	if g.Version != 1 || string(g.Value) != "1" {
		t.Errorf("replayed store = %+v, want the recorded version 1", g)
	}
	if err := v.Send(again, "b", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if n := len(v.mail["b"].msgs); n != 1 {
		t.Errorf("b has %d messages, want 1: the replayed send was applied again", n)
	}
	// Past the log the attempt goes live.
	g, _ = v.Store(again, "n", []byte("3"))
	if g.Version != 3 {
		t.Errorf("live store after replay = %+v, want version 3", g)
	}
	// A diverging attempt drops the rest of the log and goes on live.
	diverged, _ := cursor("a")
	if g, _ := v.Load(diverged, "n"); g.Version != 3 {
		t.Errorf("diverged load = %+v, want the live version 3", g)
	}
	if n := len(v.ops["a"]); n != 1 {
		t.Errorf("log of a has %d records after diverging, want 1", n)
	}
}

func TestCheckpointResume(t *testing.T) {
	var stored [][]byte
	v := newState(t, func(_ context.Context, data []byte) error {
		stored = append(stored, data)
		return nil
	})
	first, revokeFirst := cursor("b")
	a, _ := cursor("a")
	for _, m := range []string{"m1", "m2", "m3"} {
		if err := v.Send(a, "b", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Recv(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Store(first, "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := v.Checkpoint(t.Context(), first, []byte("state-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Recv(t.Context(), first); err != nil { // m2, after the checkpoint
		t.Fatal(err)
	}
	revokeFirst()
	if err := v.Checkpoint(t.Context(), first, []byte("late")); err == nil {
		t.Error("a revoked attempt's checkpoint was taken")
	}
	if len(stored) != 2 || string(stored[0]) != "state-1" {
		t.Errorf("stored %q", stored)
	}

	fresh, _ := cursor("b")
	if fresh.Resumed() {
		t.Error("resumed before Resume")
	}
	state, ok := v.Resume(fresh)
	if !ok || string(state) != "state-1" || !fresh.Resumed() {
		t.Fatalf("Resume = %q, %v (resumed %v)", state, ok, fresh.Resumed())
	}
	// The resumed attempt reads on from the checkpoint's message.
	if m, _ := v.Recv(t.Context(), fresh); string(m.Data) != "m2" {
		t.Errorf("after resume got %q, want m2", m.Data)
	}
	// And its log position is past the store it made before.
	if g, _ := v.Store(fresh, "k", []byte("y")); g.Version != 2 {
		t.Errorf("store after resume = %+v, want version 2", g)
	}
	if _, ok := v.Resume(NewCursor("a", nil)); ok {
		t.Error("a task without a checkpoint resumed")
	}
}

func TestCheckpointErrors(t *testing.T) {
	v := newState(t, func(context.Context, []byte) error { return errors.New("disk full") })
	c, _ := cursor("a")
	if err := v.Checkpoint(t.Context(), c, []byte("s")); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("store failure: %v", err)
	}
	if _, ok := v.Resume(c); ok {
		t.Error("a failed checkpoint counts")
	}
	if err := v.Checkpoint(t.Context(), c, make([]byte, sdk.MaxCheckpointSize+1)); err == nil {
		t.Error("an oversized checkpoint was taken")
	}
}
