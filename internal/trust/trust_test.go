package trust

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func mustSecret(t testing.TB) Secret {
	t.Helper()
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCreds(t testing.TB, s Secret) *Creds {
	t.Helper()
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCreds(s, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokenRoundTrip(t *testing.T) {
	s := mustSecret(t)
	tok := s.Token()
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+58 {
		t.Fatalf("token %q", tok)
	}
	for _, in := range []string{tok, "  " + tok + "\n", strings.ToUpper(tok)} {
		got, err := ParseToken(in)
		if err != nil || got != s {
			t.Fatalf("ParseToken(%q) = %v, %v", in, got, err)
		}
	}
	if strings.Contains(s.String(), tok[6:20]) {
		t.Fatal("String prints the secret")
	}
}

func TestParseTokenErrors(t *testing.T) {
	tok := mustSecret(t).Token()
	// Every single-character substitution is caught.
	body := []byte(tok)
	for i := len(TokenPrefix); i < len(body); i++ {
		orig := body[i]
		for _, r := range []byte("a7q") {
			if r == orig {
				continue
			}
			body[i] = r
			if _, err := ParseToken(string(body)); err == nil {
				t.Fatalf("typo at %d (%c->%c) accepted", i, orig, r)
			}
		}
		body[i] = orig
	}
	tests := []struct{ in, want string }{
		{"", "does not start with"},
		{"hello", "does not start with"},
		{"p2pc2-" + tok[6:], "unknown version"},
		{tok[:len(tok)-1], "characters after"},
		{tok + "a", "characters after"},
		{tok[:10] + "1" + tok[11:], "not base32"},
		{tok[:10] + "!" + tok[11:], "not base32"},
		{tok[:len(tok)-4] + swap(tok[len(tok)-4:len(tok)-2]) + tok[len(tok)-2:], "checksum"},
		{tok[:len(tok)-1] + map[bool]string{true: "7", false: "4"}[tok[len(tok)-1] == '4'], ""},
	}
	for _, tc := range tests {
		_, err := ParseToken(tc.in)
		if tc.in == tok {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseToken(%q) = %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

func swap(s string) string {
	if s[0] == s[1] {
		if s[0] == 'a' {
			return "bb"
		}
		return "aa"
	}
	return string([]byte{s[1], s[0]})
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p2pc", "swarm")
	if _, err := LoadSecret(path); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("missing file: %v", err)
	}
	s := mustSecret(t)
	if err := SaveSecret(path, s); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	got, err := LoadSecret(path)
	if err != nil || got != s {
		t.Fatalf("LoadSecret = %v, %v", got, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadSecret(path)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("loose mode: %v", err)
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("p2pc1-nonsense\n"), 0o600)
	if _, err := LoadSecret(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad content: %v", err)
	}
}

func TestDerivedKeys(t *testing.T) {
	a, b := mustSecret(t), mustSecret(t)
	if string(a.GossipKey()) == string(b.GossipKey()) || len(a.GossipKey()) != 32 {
		t.Fatal("gossip keys")
	}
	if string(a.GossipKey()) == string(a.caKey().Seed()) {
		t.Fatal("one key for two purposes")
	}
	again, err := ParseToken(a.Token())
	if err != nil {
		t.Fatal(err)
	}
	if again.SwarmID() != a.SwarmID() || string(again.GossipKey()) != string(a.GossipKey()) || a.SwarmID() == b.SwarmID() {
		t.Fatal("swarm IDs")
	}
}

func TestNodeID(t *testing.T) {
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	s := id.ID.String()
	if len(s) != 34 || strings.Count(s, "-") != 6 {
		t.Fatalf("ID %q", s)
	}
	for _, in := range []string{s, strings.ToUpper(s), strings.ReplaceAll(s, "-", "")} {
		got, err := ParseNodeID(in)
		if err != nil || got != id.ID {
			t.Fatalf("ParseNodeID(%q) = %v, %v", in, got, err)
		}
	}
	b := []byte(s)
	for i := range b {
		if b[i] == '-' {
			continue
		}
		orig := b[i]
		b[i] = map[bool]byte{true: 'b', false: 'a'}[orig == 'a']
		if _, err := ParseNodeID(string(b)); err == nil {
			t.Fatalf("typo at %d accepted", i)
		}
		b[i] = orig
	}
}

func TestLoadIdentity(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	ids := make([]*Identity, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); ids[i], errs[i] = LoadIdentity(dir) }()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i].ID != ids[0].ID {
			t.Fatalf("load %d: %v", i, errs[i])
		}
	}
	path := filepath.Join(dir, KeyFile)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	os.Chmod(path, 0o640)
	if _, err := LoadIdentity(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("loose key: %v", err)
	}
}

// handshake runs one TLS handshake over a pipe and returns both ends'
// errors and what each end saw of the other.
func handshake(t testing.TB, server, client *tls.Config) (sawClient, sawServer NodeID, serr, cerr error) {
	t.Helper()
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := tls.Server(a, server)
		serr = s.Handshake()
		if serr == nil {
			sawClient, _ = PeerID(s.ConnectionState())
		}
		a.Close()
	}()
	c := tls.Client(b, client)
	cerr = c.Handshake()
	if cerr == nil {
		sawServer, _ = PeerID(c.ConnectionState())
		// TLS 1.3: the client's certificate is checked after the client
		// finished; a read sees the server's verdict.
		var one [1]byte
		if _, err := c.Read(one[:]); err != nil && !errors.Is(err, io.EOF) {
			cerr = err
		}
	}
	b.Close()
	wg.Wait()
	return
}

// tcpPair is a connected loopback TCP pair (a net.Pipe does not buffer,
// and the two ends of a failing handshake both write).
func tcpPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

func TestMutualTLS(t *testing.T) {
	s := mustSecret(t)
	srv, cli := mustCreds(t, s), mustCreds(t, s)
	sawC, sawS, serr, cerr := handshake(t, srv.ServerTLS(), cli.ClientTLS())
	if serr != nil || cerr != nil {
		t.Fatalf("members: server %v, client %v", serr, cerr)
	}
	if sawC != cli.ID() || sawS != srv.ID() {
		t.Fatal("peer IDs not the ones proven")
	}

	foreign := mustCreds(t, mustSecret(t))
	// A stranger dials a member.
	_, _, serr, _ = handshake(t, srv.ServerTLS(), foreign.ClientTLS())
	if serr == nil {
		t.Fatal("foreign client accepted")
	}
	// A stranger that does not check the server still fails the server's
	// check of its certificate.
	blind := foreign.ClientTLS()
	blind.VerifyConnection = nil
	_, _, serr, _ = handshake(t, srv.ServerTLS(), blind)
	if !errors.Is(serr, ErrNotMember) {
		t.Fatalf("foreign client: server %v", serr)
	}
	// A member dials a stranger.
	_, _, _, cerr = handshake(t, foreign.ServerTLS(), cli.ClientTLS())
	if !errors.Is(cerr, ErrNotMember) {
		t.Fatal("foreign server accepted")
	}
	// No client certificate at all.
	noCert := cli.ClientTLS()
	noCert.Certificates = nil
	_, _, serr, _ = handshake(t, srv.ServerTLS(), noCert)
	if serr == nil {
		t.Fatal("client without certificate accepted")
	}
	// Older TLS versions are refused.
	old := cli.ClientTLS()
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	_, _, serr, _ = handshake(t, srv.ServerTLS(), old)
	if serr == nil {
		t.Fatal("TLS 1.2 accepted")
	}
}

func TestVerifyCert(t *testing.T) {
	s := mustSecret(t)
	a, b := mustCreds(t, s), mustCreds(t, s)
	id, err := a.VerifyCert(b.cert.Certificate[0])
	if err != nil || id != b.ID() {
		t.Fatalf("member cert: %v", err)
	}
	f := mustCreds(t, mustSecret(t))
	if _, err := a.VerifyCert(f.cert.Certificate[0]); !errors.Is(err, ErrNotMember) {
		t.Fatalf("foreign cert: %v", err)
	}
	if _, err := a.VerifyCert([]byte("junk")); !errors.Is(err, ErrNotMember) {
		t.Fatalf("junk cert: %v", err)
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add(mustSecret(f).Token())
	f.Add("p2pc1-")
	f.Add("P2PC1-AAAA")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseToken(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if s2, err := ParseToken(s.Token()); err != nil || s2 != s {
			t.Fatalf("round trip of %q: %v", in, err)
		}
	})
}

func FuzzParseNodeID(f *testing.F) {
	id, _ := NewIdentity()
	f.Add(id.ID.String())
	f.Add("aaaa-bbbb")
	f.Fuzz(func(t *testing.T, in string) {
		v, err := ParseNodeID(in)
		if err != nil {
			return
		}
		if v2, err := ParseNodeID(v.String()); err != nil || v2 != v {
			t.Fatalf("round trip of %q: %v", in, err)
		}
	})
}

// FuzzVerifyCert feeds certificates to the check a handshake runs before
// the peer is known.
func FuzzVerifyCert(f *testing.F) {
	s := mustSecret(f)
	c := mustCreds(f, s)
	f.Add(c.cert.Certificate[0])
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		id, err := c.VerifyCert(der)
		if err == nil && id.IsZero() {
			t.Fatal("accepted without an ID")
		}
	})
}

// BenchmarkHandshake is one full mutual TLS 1.3 handshake between two
// members over loopback TCP (the per-connection cost of trust).
func BenchmarkHandshake(b *testing.B) {
	s := mustSecret(b)
	srv, cli := mustCreds(b, s), mustCreds(b, s)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	scfg := srv.ServerTLS()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, scfg)
				if tc.Handshake() == nil {
					tc.Write([]byte{1})
				}
				tc.Close()
			}()
		}
	}()
	ccfg := cli.ClientTLS()
	b.ResetTimer()
	for b.Loop() {
		c, err := tls.Dial("tcp", l.Addr().String(), ccfg)
		if err != nil {
			b.Fatal(err)
		}
		var one [1]byte
		if _, err := c.Read(one[:]); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
