package trust

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ErrNotMember is wrapped by the handshake error when a peer's certificate
// does not prove membership of this swarm.
var ErrNotMember = errors.New("peer certificate is not from this swarm (another swarm's secret, or none)")

// ErrRevoked is wrapped by the handshake error when a peer's certificate
// names a node the swarm's creator revoked.
var ErrRevoked = errors.New("peer certificate was revoked by the swarm's creator")

// Creds are a member's credentials: its identity and its certificate
// signed by the swarm CA.
type Creds struct {
	id     *Identity
	cert   tls.Certificate
	caPub  ed25519.PublicKey
	swarm  string
	secret Secret
	// invites: the certificate was issued by the creator's random CA.
	invites bool
	// revoked holds the node IDs the creator revoked (invites mode).
	revoked atomic.Pointer[map[NodeID]bool]
}

// Validity of member certificates. Peers do not check it (see doc.go), so
// clocks need not agree; it is wide for other tools that might look.
var (
	certNotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	certNotAfter  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// NewCreds signs a certificate for id with the swarm CA of s (the
// secret-derived mode).
func NewCreds(s Secret, id *Identity) (*Creds, error) {
	ca := s.caKey()
	der, err := signLeaf(ca, id.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return newCreds(s, id, ca.Public().(ed25519.PublicKey), der), nil
}

func newCreds(s Secret, id *Identity, caPub ed25519.PublicKey, der []byte) *Creds {
	return &Creds{
		id:     id,
		cert:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: id.Key},
		caPub:  caPub,
		swarm:  swarmIDOf(caPub),
		secret: s,
	}
}

// NewIssuedCreds are the credentials of a member of an invites-mode swarm:
// id's certificate der, issued by the swarm's creator, must verify under
// caPub and name id's key. s gives the gossip key only.
func NewIssuedCreds(s Secret, id *Identity, caPub ed25519.PublicKey, der []byte) (*Creds, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	got, err := verifyUnder(caPub, cert)
	if err != nil {
		return nil, fmt.Errorf("node certificate: not issued by this swarm's creator: %w", err)
	}
	if got != id.ID {
		return nil, fmt.Errorf("node certificate names node %s, not this node (%s): was the data folder's node.key replaced?", got, id.ID)
	}
	c := newCreds(s, id, caPub, der)
	c.invites = true
	return c, nil
}

// signLeaf signs a member certificate for pub with the CA key ca.
func signLeaf(ca ed25519.PrivateKey, pub ed25519.PublicKey) ([]byte, error) {
	caPub := ca.Public().(ed25519.PublicKey)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "p2pc swarm " + swarmIDOf(caPub)},
		NotBefore:             certNotBefore,
		NotAfter:              certNotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, ca)
	if err != nil {
		return nil, fmt.Errorf("swarm CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("swarm CA: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: IDOf(pub).String()},
		NotBefore:    certNotBefore,
		NotAfter:     certNotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, pub, ca)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	return der, nil
}

// swarmIDOf names a swarm by its CA public key: the first two groups of
// the key's ID.
func swarmIDOf(caPub ed25519.PublicKey) string { return IDOf(caPub).String()[:9] }

// ID is this node's ID.
func (c *Creds) ID() NodeID { return c.id.ID }

// SwarmID names the swarm (see Secret.SwarmID).
func (c *Creds) SwarmID() string { return c.swarm }

// GossipKey is the swarm's memberlist key.
func (c *Creds) GossipKey() []byte { return c.secret.GossipKey() }

// VerifyCert checks that a DER certificate proves membership of the swarm
// and returns the node ID it names. Time is not checked.
func (c *Creds) VerifyCert(der []byte) (NodeID, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return NodeID{}, fmt.Errorf("%w: %v", ErrNotMember, err)
	}
	return c.verify(cert)
}

func (c *Creds) verify(cert *x509.Certificate) (NodeID, error) {
	id, err := verifyUnder(c.caPub, cert)
	if err != nil {
		return id, err
	}
	if r := c.revoked.Load(); r != nil && (*r)[id] {
		return NodeID{}, fmt.Errorf("%w: node %s", ErrRevoked, id)
	}
	return id, nil
}

// verifyUnder checks that cert is an Ed25519 certificate signed by caPub
// and returns the node ID its key gives.
func verifyUnder(caPub ed25519.PublicKey, cert *x509.Certificate) (NodeID, error) {
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || cert.SignatureAlgorithm != x509.PureEd25519 {
		return NodeID{}, fmt.Errorf("%w: not an Ed25519 member certificate", ErrNotMember)
	}
	if !ed25519.Verify(caPub, cert.RawTBSCertificate, cert.Signature) {
		return NodeID{}, ErrNotMember
	}
	return IDOf(pub), nil
}

// SetRevoked replaces the set of revoked node IDs: from now on their
// certificates are refused at the handshake.
func (c *Creds) SetRevoked(ids []NodeID) {
	m := make(map[NodeID]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	c.revoked.Store(&m)
}

// Invites reports whether the swarm is in invites mode (certificates
// issued by its creator, not derived from the secret).
func (c *Creds) Invites() bool { return c.invites }

// CAPublic is the swarm CA's public key.
func (c *Creds) CAPublic() ed25519.PublicKey { return c.caPub }

// Secret is the swarm secret (the gossip key's source).
func (c *Creds) Secret() Secret { return c.secret }

// verifyConn is the VerifyConnection of both ends: exactly one certificate,
// from the swarm CA.
func (c *Creds) verifyConn(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) != 1 {
		return fmt.Errorf("%w: %d certificates presented, want 1", ErrNotMember, len(cs.PeerCertificates))
	}
	_, err := c.verify(cs.PeerCertificates[0])
	return err
}

func (c *Creds) base() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		// Certificates are checked by verifyConn against the swarm CA,
		// without host names or clocks; the standard checks need both.
		InsecureSkipVerify:     true,
		VerifyConnection:       c.verifyConn,
		SessionTicketsDisabled: true,
	}
}

// ServerTLS is the configuration of a node's listener: TLS 1.3, a client
// certificate from the swarm required.
func (c *Creds) ServerTLS() *tls.Config {
	cfg := c.base()
	cfg.ClientAuth = tls.RequireAnyClientCert
	return cfg
}

// ClientTLS is the configuration for dialling a node: TLS 1.3, this
// node's certificate presented, the server's checked against the swarm.
func (c *Creds) ClientTLS() *tls.Config { return c.base() }

// PeerID is the node ID proven by the other end of a verified connection.
func PeerID(cs tls.ConnectionState) (NodeID, error) {
	if len(cs.PeerCertificates) == 0 {
		return NodeID{}, errors.New("no peer certificate")
	}
	pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return NodeID{}, errors.New("peer certificate is not Ed25519")
	}
	return IDOf(pub), nil
}

// PeerIDFromContext is the node ID of the other end of a gRPC call: the
// server's ctx of a handler, or a client stream's Context().
func PeerIDFromContext(ctx context.Context) (NodeID, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return NodeID{}, errors.New("no peer in context")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return NodeID{}, errors.New("connection is not TLS")
	}
	return PeerID(info.State)
}

// Ephemeral returns credentials for s with a fresh identity that is not
// saved: for short-lived observers and tests.
func Ephemeral(s Secret) (*Creds, error) {
	id, err := NewIdentity()
	if err != nil {
		return nil, err
	}
	return NewCreds(s, id)
}

// TestMember returns the credentials of one member of a fresh swarm, made
// in memory: for tests and benchmarks whose both ends connect as members.
// It panics if the system's random source fails.
func TestMember() *Creds {
	s, err := NewSecret()
	if err != nil {
		panic(err)
	}
	c, err := Ephemeral(s)
	if err != nil {
		panic(err)
	}
	return c
}
