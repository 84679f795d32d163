// Package transport listens and dials by address scheme.
//
// An address is "scheme://rest" or a bare "host:port", which is tcp
// (DefaultScheme). The canonical form writes tcp addresses bare and every
// other scheme with its scheme; addresses are compared, used as keys and
// gossiped in that form (Canonical).
//
// A Registry maps schemes to Transports. It is an explicit value: Default
// lists the transports p2pc ships (tcp), and nothing registers itself at
// init. Tests build their own registry and Register more (package
// transporttest's in-memory transport). A registry is read-only once in
// use. An address of an unregistered scheme fails with an error that
// wraps ErrUnknownScheme and names the scheme and the address.
//
// A Transport returns net.Listener and net.Conn; TLS runs on top. Its
// listeners report its scheme as Addr().Network() (AddrOf). Capabilities
// beyond listen and dial are interfaces checked with a type assertion:
// Bulk (the block transfer's bulk path beside gRPC) is tcp's.
//
// No other package of p2pc opens stream sockets itself (internal/archtest
// checks it; the test harness is exempt).
package transport
