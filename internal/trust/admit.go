package trust

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/transport"
)

// The admission protocol (p2pc-admit/1): on the creator's admission port,
// TLS 1.3 with ALPN "p2pc-admit/1". The creator presents its member
// certificate, which the client checks against the CA key it holds; the
// client presents any Ed25519 certificate (a newcomer's is self-signed),
// and the handshake proves it holds that key. Then one JSON line each
// way: the request {"op": "redeem", "code", "name"} is answered with the
// certificate issued for the client's key and the swarm secret's token, {"op": "revoked"} with the
// signed revocation list; a refusal is {"error": "..."}.
const admitALPN = "p2pc-admit/1"

const (
	admitTimeout = 10 * time.Second // a whole exchange
	admitMaxLine = 4 << 10          // a request line
	admitMaxConc = 16               // exchanges served at once
	admitMaxResp = 1 << 20          // an answer line
)

type admitRequest struct {
	Op   string `json:"op"`
	Code []byte `json:"code,omitempty"`
	Name string `json:"name,omitempty"`
}

type admitResponse struct {
	Cert    []byte `json:"cert,omitempty"`
	Token   string `json:"token,omitempty"` // the swarm secret, with Cert
	Revoked []byte `json:"revoked,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ServeAdmission serves the admission protocol on lis for the creator
// (creds its own member credentials, reg its registry) until ctx ends.
func ServeAdmission(ctx context.Context, lis net.Listener, creds *Creds, reg *Registry, log *slog.Logger) error {
	cfg := &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{creds.cert},
		ClientAuth:             tls.RequireAnyClientCert,
		NextProtos:             []string{admitALPN},
		SessionTicketsDisabled: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) != 1 {
				return fmt.Errorf("admission: %d certificates presented, want 1", len(cs.PeerCertificates))
			}
			if _, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey); !ok {
				return errors.New("admission: not an Ed25519 node key")
			}
			return nil
		},
	}
	stop := context.AfterFunc(ctx, func() { lis.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, admitMaxConc)
	var mu sync.Mutex // one redemption at a time
	for {
		c, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("admission: %w", err)
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // busy: the newcomer retries
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			defer c.Close()
			c.SetDeadline(time.Now().Add(admitTimeout))
			tc := tls.Server(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				log.Debug("admission handshake failed", "remote", c.RemoteAddr(), "err", err)
				return
			}
			pub := tc.ConnectionState().PeerCertificates[0].PublicKey.(ed25519.PublicKey)
			var req admitRequest
			line, err := bufio.NewReader(io.LimitReader(tc, admitMaxLine)).ReadBytes('\n')
			if err != nil || json.Unmarshal(line, &req) != nil {
				log.Debug("admission: malformed request", "remote", c.RemoteAddr())
				return
			}
			var resp admitResponse
			switch req.Op {
			case "redeem":
				var code [CodeSize]byte
				copy(code[:], req.Code)
				mu.Lock()
				der, err := reg.Redeem(code, pub, req.Name, time.Now())
				mu.Unlock()
				if err != nil {
					resp.Error = err.Error()
					log.Warn("invitation refused", "remote", c.RemoteAddr(), "node", IDOf(pub), "err", err)
				} else {
					resp.Cert, resp.Token = der, creds.secret.Token()
					log.Info("invitation redeemed: new member", "node", IDOf(pub), "name", req.Name, "remote", c.RemoteAddr())
				}
			case "revoked":
				ids, err := reg.Revoked()
				if err != nil {
					resp.Error = err.Error()
				} else {
					resp.Revoked = reg.CA.Sign(Revocations{At: time.Now().UTC(), IDs: ids})
				}
			default:
				resp.Error = fmt.Sprintf("unknown request %q", req.Op)
			}
			b, _ := json.Marshal(resp)
			tc.Write(append(b, '\n'))
		})
	}
}

// exchange dials addr, checks that the server holds a certificate of
// caPub, sends req with cert as the client's, and reads the answer.
func exchange(ctx context.Context, addr string, caPub ed25519.PublicKey, cert tls.Certificate, req admitRequest) (admitResponse, error) {
	var resp admitResponse
	ctx, cancel := context.WithTimeout(ctx, admitTimeout)
	defer cancel()
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{admitALPN},
		// The server's certificate is checked against the swarm CA by
		// VerifyConnection, without host names or clocks.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) != 1 {
				return fmt.Errorf("%w: %d certificates presented, want 1", ErrNotMember, len(cs.PeerCertificates))
			}
			_, err := verifyUnder(caPub, cs.PeerCertificates[0])
			return err
		},
		SessionTicketsDisabled: true,
	}
	raw, err := transport.Default().Dial(ctx, addr)
	if err != nil {
		return resp, fmt.Errorf("the swarm's creator at %s (is its 'p2pc join' running and reachable?): %w", addr, err)
	}
	c := tls.Client(raw, cfg)
	defer c.Close()
	if err := c.HandshakeContext(ctx); err != nil {
		return resp, fmt.Errorf("the swarm's creator at %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return resp, fmt.Errorf("the swarm's creator at %s: %w", addr, err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, admitMaxResp)).ReadBytes('\n')
	if err != nil {
		return resp, fmt.Errorf("the swarm's creator at %s: no answer: %w", addr, err)
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return resp, fmt.Errorf("the swarm's creator at %s: malformed answer: %w", addr, err)
	}
	return resp, nil
}

// ErrRefused is wrapped by Redeem's error when the creator refused the
// invitation (the message says why).
var ErrRefused = errors.New("the swarm's creator refused the invitation")

// Redeem presents inv to its creator for identity id (named name) and
// returns the membership it gives.
func Redeem(ctx context.Context, inv Invitation, id *Identity, name string) (*Membership, error) {
	cert, err := selfSigned(id)
	if err != nil {
		return nil, err
	}
	resp, err := exchange(ctx, inv.Addr, inv.CA, cert, admitRequest{Op: "redeem", Code: inv.Code[:], Name: name})
	if err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, resp.Error)
	}
	x, err := x509.ParseCertificate(resp.Cert)
	if err != nil {
		return nil, fmt.Errorf("certificate from the creator: %w", err)
	}
	if got, err := verifyUnder(inv.CA, x); err != nil || got != id.ID {
		return nil, fmt.Errorf("certificate from the creator does not name this node under the invitation's CA (%v)", err)
	}
	if _, err := ParseToken(resp.Token); err != nil {
		return nil, fmt.Errorf("swarm secret from the creator: %w", err)
	}
	return &Membership{Token: resp.Token, CA: inv.CA, Cert: resp.Cert, Creator: inv.Addr}, nil
}

// FetchRevocations asks the creator at addr for its signed revocation
// list and returns it, verified, with its signed bytes.
func FetchRevocations(ctx context.Context, addr string, c *Creds) (Revocations, []byte, error) {
	resp, err := exchange(ctx, addr, c.caPub, c.cert, admitRequest{Op: "revoked"})
	if err != nil {
		return Revocations{}, nil, err
	}
	if resp.Error != "" {
		return Revocations{}, nil, fmt.Errorf("revocation list from %s: %s", addr, resp.Error)
	}
	rv, err := OpenRevocations(c.caPub, resp.Revoked)
	return rv, resp.Revoked, err
}

// selfSigned is a certificate for id's key signed by itself: what a
// newcomer shows before it has one from the swarm.
func selfSigned(id *Identity) (tls.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: id.ID.String()},
		NotBefore:    certNotBefore,
		NotAfter:     certNotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, id.Key.Public(), id.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: id.Key}, nil
}
