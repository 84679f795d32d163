package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Transport listens and dials the addresses of one scheme. addr is the
// address without its scheme ("host:port" for tcp). Connections are
// byte streams; TLS runs on top of them, never inside a transport.
type Transport interface {
	Listen(ctx context.Context, addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// Bulk is the capability of a transport on which the bulk block path
// (package transfer) runs beside gRPC: its connections are plain byte
// streams, so one listener serves both protocols, told apart by their
// first bytes, and a client may open more connections to the same
// address for block bytes. Callers check it with a type assertion.
type Bulk interface {
	Transport
	// DialBulk opens a connection for the bulk path to addr (without
	// its scheme).
	DialBulk(ctx context.Context, addr string) (net.Conn, error)
}

// DefaultScheme is the scheme of an address written without one.
const DefaultScheme = "tcp"

// ErrUnknownScheme is wrapped by the errors about an address whose
// scheme no transport of the registry serves.
var ErrUnknownScheme = errors.New("unknown transport scheme")

// Registry maps address schemes to transports. It is built explicitly
// (Default, or NewRegistry and Register) and read-only once in use:
// Register must not race with Listen or Dial.
type Registry struct {
	byScheme map[string]Transport
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byScheme: map[string]Transport{}} }

// Default returns a registry of the transports p2pc ships: this is the
// one place where they are listed.
func Default() *Registry {
	r := NewRegistry()
	r.Register(DefaultScheme, TCP{})
	return r
}

// Register serves scheme with t. It panics on an empty or invalid scheme
// or a scheme registered already: both are programming errors.
func (r *Registry) Register(scheme string, t Transport) {
	if scheme == "" || strings.ContainsAny(scheme, ":/") || t == nil {
		panic(fmt.Sprintf("transport: register %q: invalid scheme or nil transport", scheme))
	}
	if _, ok := r.byScheme[scheme]; ok {
		panic(fmt.Sprintf("transport: scheme %q registered twice", scheme))
	}
	r.byScheme[scheme] = t
}

// Schemes lists the registered schemes, sorted.
func (r *Registry) Schemes() []string {
	out := make([]string, 0, len(r.byScheme))
	for s := range r.byScheme {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Split separates an address into its scheme and the rest: "tcp://h:p"
// gives ("tcp", "h:p"), a bare "h:p" gives (DefaultScheme, "h:p").
func Split(addr string) (scheme, rest string) {
	if s, r, ok := strings.Cut(addr, "://"); ok {
		return s, r
	}
	return DefaultScheme, addr
}

// Join writes an address of scheme: bare for DefaultScheme, the
// canonical form, "scheme://rest" otherwise.
func Join(scheme, rest string) string {
	if scheme == DefaultScheme {
		return rest
	}
	return scheme + "://" + rest
}

// Canonical returns addr in canonical form: "tcp://h:p" and "h:p" are
// both "h:p"; other schemes keep theirs. Addresses are compared, used as
// keys and gossiped in this form.
func Canonical(addr string) string { return Join(Split(addr)) }

// AddrOf returns the canonical address of l: its transport's scheme is
// l.Addr().Network() (a transport's listeners report it so).
func AddrOf(l net.Listener) string {
	a := l.Addr()
	return Join(a.Network(), a.String())
}

// Lookup returns the transport of addr's scheme and the address without
// its scheme.
func (r *Registry) Lookup(addr string) (Transport, string, error) {
	scheme, rest := Split(addr)
	t, ok := r.byScheme[scheme]
	if !ok {
		return nil, "", fmt.Errorf("address %q: %w %q (known: %s)", addr, ErrUnknownScheme, scheme, strings.Join(r.Schemes(), ", "))
	}
	return t, rest, nil
}

// Listen listens on addr with the transport of its scheme.
func (r *Registry) Listen(ctx context.Context, addr string) (net.Listener, error) {
	t, rest, err := r.Lookup(addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	l, err := t.Listen(ctx, rest)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return l, nil
}

// Dial dials addr with the transport of its scheme.
func (r *Registry) Dial(ctx context.Context, addr string) (net.Conn, error) {
	t, rest, err := r.Lookup(addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c, err := t.Dial(ctx, rest)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}
