package trust

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inviteSwarm makes an invites-mode swarm in memory: its secret, its CA
// and n members with certificates issued by the CA.
func inviteSwarm(t *testing.T, n int) (Secret, *CA, []*Creds) {
	t.Helper()
	s := mustSecret(t)
	ca, err := NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var cs []*Creds
	for range n {
		id, err := NewIdentity()
		if err != nil {
			t.Fatal(err)
		}
		der, err := ca.Issue(id.Key.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewIssuedCreds(s, id, ca.Public(), der)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return s, ca, cs
}

// TestInvitesModeRefusesMintedIdentities: in an invites-mode swarm a
// member holding the secret cannot make a second identity: a certificate
// derived from the secret, or self-signed, is refused both ways.
func TestInvitesModeRefusesMintedIdentities(t *testing.T) {
	s, _, cs := inviteSwarm(t, 2)
	srv, cli := cs[0], cs[1]
	if _, _, serr, cerr := handshake(t, srv.ServerTLS(), cli.ClientTLS()); serr != nil || cerr != nil {
		t.Fatalf("issued members: server %v, client %v", serr, cerr)
	}
	if srv.SwarmID() != cli.SwarmID() || srv.SwarmID() == s.SwarmID() || !srv.Invites() {
		t.Fatalf("swarm IDs %s %s (secret-derived %s)", srv.SwarmID(), cli.SwarmID(), s.SwarmID())
	}
	minted := mustCreds(t, s) // what any holder of the secret can make
	blind := minted.ClientTLS()
	blind.VerifyConnection = nil
	if _, _, serr, _ := handshake(t, srv.ServerTLS(), blind); !errors.Is(serr, ErrNotMember) {
		t.Fatalf("secret-derived client: server %v", serr)
	}
	if _, _, _, cerr := handshake(t, minted.ServerTLS(), cli.ClientTLS()); !errors.Is(cerr, ErrNotMember) {
		t.Fatalf("secret-derived server: client %v", cerr)
	}
	id, _ := NewIdentity()
	self, err := selfSigned(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.VerifyCert(self.Certificate[0]); !errors.Is(err, ErrNotMember) {
		t.Fatalf("self-signed cert: %v", err)
	}
	// A certificate issued for another key does not make creds.
	if _, err := NewIssuedCreds(s, id, srv.CAPublic(), cli.cert.Certificate[0]); err == nil {
		t.Fatal("creds from another node's certificate")
	}
}

func TestRevokedRefused(t *testing.T) {
	_, ca, cs := inviteSwarm(t, 2)
	srv, cli := cs[0], cs[1]
	signed := ca.Sign(Revocations{At: time.Now(), IDs: []NodeID{cli.ID()}})
	rv, err := OpenRevocations(ca.Public(), signed)
	if err != nil || len(rv.IDs) != 1 || rv.IDs[0] != cli.ID() {
		t.Fatalf("open: %v %v", rv, err)
	}
	other, _ := NewCA(t.TempDir())
	if _, err := OpenRevocations(other.Public(), signed); err == nil {
		t.Fatal("list accepted under another CA")
	}
	forged := strings.Replace(string(signed), `"list":"`, `"list":"x`, 1)
	if _, err := OpenRevocations(ca.Public(), []byte(forged)); err == nil {
		t.Fatal("altered list accepted")
	}
	srv.SetRevoked(rv.IDs)
	blind := cli.ClientTLS()
	blind.VerifyConnection = nil
	if _, _, serr, _ := handshake(t, srv.ServerTLS(), blind); !errors.Is(serr, ErrRevoked) {
		t.Fatalf("revoked client: server %v", serr)
	}
	srv.SetRevoked(nil)
	if _, _, serr, cerr := handshake(t, srv.ServerTLS(), cli.ClientTLS()); serr != nil || cerr != nil {
		t.Fatalf("after unrevoking: %v %v", serr, cerr)
	}
}

func TestInvitationToken(t *testing.T) {
	_, ca, _ := inviteSwarm(t, 0)
	inv := Invitation{CA: ca.Public(), Addr: "192.0.2.7:7071"}
	inv.Code[3] = 9
	tok := inv.Token()
	got, err := ParseInvitation("  " + strings.ToUpper(tok) + "\n")
	if err != nil || !got.CA.Equal(inv.CA) || got.Code != inv.Code || got.Addr != inv.Addr {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	b := []byte(tok)
	b[30] = map[bool]byte{true: 'b', false: 'a'}[b[30] == 'a']
	for in, want := range map[string]string{
		string(b):              "checksum",
		tok[:40]:               "cut short",
		mustSecret(t).Token():  "does not start with",
		tok[:len(tok)-1] + "1": "malformed",
	} {
		if _, err := ParseInvitation(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseInvitation(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenRegistry(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("registry without CA: %v", err)
	}
	if _, err := NewCA(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCA(dir); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second CA: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, CAKeyFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode %v", st.Mode())
	}
	r, err := OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	code, err := r.Invite(time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewIdentity()
	b, _ := NewIdentity()
	pubA, pubB := a.Key.Public().(ed25519.PublicKey), b.Key.Public().(ed25519.PublicKey)
	var wrong [CodeSize]byte
	if _, err := r.Redeem(wrong, pubA, "a", now); !errors.Is(err, ErrInviteUnknown) {
		t.Fatalf("wrong code: %v", err)
	}
	der, err := r.Redeem(code, pubA, "a", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewIssuedCreds(mustSecret(t), a, r.CA.Public(), der); err != nil {
		t.Fatalf("issued certificate: %v", err)
	}
	if _, err := r.Redeem(code, pubB, "b", now); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("reused code: %v", err)
	}
	old, _ := r.Invite(time.Minute, now)
	if _, err := r.Redeem(old, pubB, "b", now.Add(2*time.Minute)); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("expired code: %v", err)
	}
	if err := r.Revoke(a.ID, now); err != nil {
		t.Fatal(err)
	}
	if err := r.Revoke(b.ID, now); err == nil || !strings.Contains(err.Error(), "not an identity") {
		t.Fatalf("revoke unknown: %v", err)
	}
	again, _ := r.Invite(time.Hour, now)
	if _, err := r.Redeem(again, pubA, "a", now); !errors.Is(err, ErrIDRevoked) {
		t.Fatalf("revoked node redeems: %v", err)
	}
	ms, err := r.Members()
	if err != nil || len(ms) != 1 || ms[0].ID != a.ID || ms[0].Name != "a" || ms[0].Revoked.IsZero() {
		t.Fatalf("members %+v %v", ms, err)
	}
	if ids, err := r.Revoked(); err != nil || len(ids) != 1 || ids[0] != a.ID {
		t.Fatalf("revoked %v %v", ids, err)
	}
}

// TestAdmission: the protocol on a loopback socket: a newcomer redeems
// its code once, a second try is refused with the creator's reason, and
// a member fetches the signed revocation list.
func TestAdmission(t *testing.T) {
	dir := t.TempDir()
	s := mustSecret(t)
	ca, err := NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	cid, _ := NewIdentity()
	der, _ := ca.Issue(cid.Key.Public().(ed25519.PublicKey))
	creator, err := NewIssuedCreds(s, cid, ca.Public(), der)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeAdmission(ctx, lis, creator, r, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	code, _ := r.Invite(time.Hour, time.Now())
	inv := Invitation{CA: ca.Public(), Code: code, Addr: lis.Addr().String()}
	if raw, err := b32.DecodeString(inv.Token()[len(InvitePrefix):]); err != nil || bytes.Contains(raw, s[:]) {
		t.Fatalf("the invitation carries the secret (%v)", err)
	}
	nid, _ := NewIdentity()
	m, err := Redeem(ctx, inv, nid, "newcomer")
	if err != nil {
		t.Fatal(err)
	}
	if m.Token != s.Token() || m.Creator != inv.Addr {
		t.Fatalf("membership from the creator: %+v", m)
	}
	ndir := t.TempDir()
	if err := m.Save(ndir); err != nil {
		t.Fatal(err)
	}
	m2, err := LoadMembership(ndir)
	if err != nil {
		t.Fatal(err)
	}
	member, err := m2.Creds(nid)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewIdentity()
	if _, err := Redeem(ctx, inv, other, "second"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("reused invitation: %v", err)
	}
	// An invitation naming another CA: the creator is not believed.
	fake, _ := NewCA(t.TempDir())
	if _, err := Redeem(ctx, Invitation{CA: fake.Public(), Code: code, Addr: inv.Addr}, other, "x"); !errors.Is(err, ErrNotMember) {
		t.Fatalf("creator under another CA: %v", err)
	}
	r.Revoke(other.ID, time.Now()) // unknown: refused, changes nothing
	r.Revoke(nid.ID, time.Now())
	rv, signed, err := FetchRevocations(ctx, inv.Addr, member)
	if err != nil || len(rv.IDs) != 1 || rv.IDs[0] != nid.ID {
		t.Fatalf("revocations %v %v", rv, err)
	}
	if err := SaveRevocations(ndir, signed); err != nil {
		t.Fatal(err)
	}
	if rv, err := LoadRevocations(ndir, ca.Public()); err != nil || len(rv.IDs) != 1 {
		t.Fatalf("kept revocations %v %v", rv, err)
	}
}
