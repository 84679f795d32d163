package transport_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/transport/transporttest"
)

func TestUnknownSchemeNamed(t *testing.T) {
	r := transport.Default()
	for _, op := range []func(context.Context, string) error{
		func(ctx context.Context, a string) error { _, err := r.Listen(ctx, a); return err },
		func(ctx context.Context, a string) error { _, err := r.Dial(ctx, a); return err },
	} {
		err := op(t.Context(), "quic://10.0.0.1:7000")
		if !errors.Is(err, transport.ErrUnknownScheme) {
			t.Fatalf("err %v, want ErrUnknownScheme", err)
		}
		for _, want := range []string{`"quic"`, "quic://10.0.0.1:7000", "known: tcp"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %s", err, want)
			}
		}
	}
}

func TestBareAddressIsTCP(t *testing.T) {
	r := transport.Default()
	for _, addr := range []string{"127.0.0.1:7000", "tcp://127.0.0.1:7000", "[::1]:7000"} {
		tr, rest, err := r.Lookup(addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if _, ok := tr.(transport.TCP); !ok {
			t.Errorf("%s: transport %T, want TCP", addr, tr)
		}
		if strings.Contains(rest, "://") {
			t.Errorf("%s: rest %q keeps the scheme", addr, rest)
		}
	}
	// A real round trip: listen with a scheme, dial the bare address.
	l, err := r.Listen(t.Context(), "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := transport.AddrOf(l)
	if strings.Contains(addr, "://") {
		t.Fatalf("AddrOf %q: a tcp address is canonical without its scheme", addr)
	}
	roundTrip(t, r, l, addr)
	roundTrip(t, r, l, "tcp://"+addr)
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:7000":       "10.0.0.1:7000",
		"tcp://10.0.0.1:7000": "10.0.0.1:7000",
		"tcp://[::1]:7000":    "[::1]:7000",
		"mem://a":             "mem://a",
		"quic://h:1":          "quic://h:1",
	} {
		if got := transport.Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	r := transport.Default()
	defer func() {
		if recover() == nil {
			t.Fatal("second tcp registration did not panic")
		}
	}()
	r.Register("tcp", transport.TCP{})
}

func TestBulkIsACapability(t *testing.T) {
	if _, ok := transport.Transport(transport.TCP{}).(transport.Bulk); !ok {
		t.Error("tcp lacks the bulk capability")
	}
	if _, ok := transport.Transport(transporttest.NewMem()).(transport.Bulk); ok {
		t.Error("mem has the bulk capability")
	}
}

// TestMemTransport: a transport registered by a test is reached through
// the registry by its scheme, and reports it in its listener's address.
func TestMemTransport(t *testing.T) {
	r := transport.Default()
	mem := transporttest.NewMem()
	r.Register(transporttest.Scheme, mem)
	l, err := r.Listen(t.Context(), "mem://a")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := transport.AddrOf(l); got != "mem://a" {
		t.Fatalf("AddrOf = %q, want mem://a", got)
	}
	roundTrip(t, r, l, "mem://a")
	if mem.Dials.Load() != 1 {
		t.Fatalf("mem dials %d, want 1", mem.Dials.Load())
	}
	if _, err := r.Dial(t.Context(), "mem://b"); err == nil || !strings.Contains(err.Error(), `mem "b"`) {
		t.Fatalf("dial of nothing listening: %v", err)
	}
}

// roundTrip dials addr, accepts on l and sends a line both ways.
func roundTrip(t *testing.T, r *transport.Registry, l net.Listener, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil {
			accepted <- err
			return
		}
		_, err = c.Write(buf)
		accepted <- err
	}()
	c, err := r.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v", got, err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}
