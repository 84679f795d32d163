package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/trust"
)

var inviteRe = regexp.MustCompile(`^p2pc join --invite (p2pcinv1-[a-z2-7]+)\n$`)

// invite runs `p2pc swarm invite` on the creator's data folder and
// returns the invitation.
func invite(t *testing.T, env []string, creator string, extra ...string) string {
	t.Helper()
	r := p2pcEnv(t, env, append([]string{"--data", creator, "swarm", "invite"}, extra...)...)
	m := inviteRe.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("swarm invite: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	return m[1]
}

// waitListed runs `p2pc peers` from data towards addr until it lists
// name, and returns when it first did.
func waitListed(t *testing.T, env []string, data, addr, name string) time.Time {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		r := p2pcEnv(t, env, "--data", data, "peers", "--no-mdns", "--join", addr, "--wait", "100ms")
		if regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s`).MatchString(r.stdout) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listed by p2pc peers within 45 s:\n%s\n%s", name, r.stdout, r.stderr)
		}
	}
}

// TestInviteOnlySwarm: an invite-only swarm through the real binary. A
// machine joins with a one-time line and runs a job's tasks; a reused,
// wrong or expired code is refused with a clear error; a member that
// derives a certificate from the secret it holds (a second identity) is
// refused at the handshake; a revoked member is refused by the creator,
// by another member once the list reached it, and by the run of a member
// whose kept list was older.
func TestInviteOnlySwarm(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	// No swarm token from the environment: the invitation carries it.
	env := []string{"P2PC_SWARM=", "XDG_CONFIG_HOME=" + filepath.Join(dir, "cfg")}
	cdata := filepath.Join(dir, "creator")
	if r := p2pcEnv(t, env, "--data", cdata, "swarm", "init", "--invites"); r.code != 0 || !strings.Contains(r.stderr, "p2pc swarm invite") {
		t.Fatalf("swarm init --invites: exit %d\n%s", r.code, r.stderr)
	}
	if st, err := os.Stat(filepath.Join(cdata, trust.CAKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", st, err)
	}
	if r := p2pcEnv(t, env, "--data", cdata, "swarm", "invite"); r.code != 2 || !strings.Contains(r.stderr, "start 'p2pc join'") {
		t.Fatalf("invite before the creator's peer runs: exit %d\n%s", r.code, r.stderr)
	}
	poll := []string{"--admit-listen", "127.0.0.1:0", "--revocation-poll", "200ms"}
	// The creator's own peer takes no job from the tests' runs (they
	// submit from its data folder, so as its node ID): the tasks go to
	// the invited members.
	other, err := trust.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	creator, caddr, _ := startJoin(t, dir, "creator", env, append([]string{"--submitters", other.ID.String()}, poll...)...)

	// A newcomer joins with the line; timed until the creator lists it.
	inv := invite(t, env, cdata)
	load, _ := os.ReadFile("/proc/loadavg")
	t0 := time.Now()
	a, aaddr, aid := startJoin(t, dir, "a", env, append([]string{"--invite", inv, "--join", caddr}, poll...)...)
	tUp := time.Since(t0)
	tListed := waitListed(t, env, cdata, caddr, "a").Sub(t0)
	t.Logf("join by invitation: %v to listening, %v to listed by p2pc peers (load %s)", tUp.Round(time.Millisecond), tListed.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
	if !strings.Contains(a.Stderr(), "admitted to the invite-only swarm as node "+aid) {
		t.Fatalf("a did not say it was admitted:\n%s", a.Stderr())
	}

	// A job runs on the new member.
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(markedEchoSpec, "inv"))
	var runFrom func(data, out string, join ...string) map[string]int
	runOn := func(out string, join ...string) map[string]int {
		t.Helper()
		return runFrom(cdata, out, join...)
	}
	runFrom = func(data, out string, join ...string) map[string]int {
		t.Helper()
		r := p2pcEnv(t, env, "--data", data, "run", spec, "--out", filepath.Join(dir, out), "--no-mdns", "--local-slots", "0", "--join", strings.Join(join, ","))
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		rep := readReport(t, filepath.Join(dir, out))
		checkOnce(t, rep)
		on := map[string]int{}
		for _, task := range rep.Tasks {
			for _, at := range task.Attempts {
				on[at.Peer+"@"+at.PeerID]++
			}
		}
		return on
	}
	if on := runOn("out1", aaddr); len(on) != 1 || on["a@"+aid] == 0 {
		t.Fatalf("attempts by peer %v, want a (%s) only", on, aid)
	}

	if r := p2pcEnv(t, env, "--data", filepath.Join(dir, "a"), "swarm", "show"); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "invite-only swarm") || !strings.Contains(r.stderr, aid) {
		t.Fatalf("swarm show on a member: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	// The same code again, a code the creator never made, an expired one.
	parsed, err := trust.ParseInvitation(inv)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Code[0] ^= 1
	expired := invite(t, env, cdata, "--expires", "1ms")
	for _, tc := range []struct{ name, inv, want string }{
		{"reused", inv, "invitation already used"},
		{"wrong", parsed.Token(), "invitation code unknown"},
		{"expired", expired, "invitation expired"},
		{"malformed", inv[:len(inv)-3], "invitation:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p2pcEnv(t, env, "--data", filepath.Join(dir, "x-"+tc.name), "join", "--no-mdns", "--listen", "127.0.0.1:0", "--invite", tc.inv)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || strings.Contains(r.stdout, "listening") {
				t.Fatalf("exit %d, stderr:\n%s\nwant one line with %q", r.code, r.stderr, tc.want)
			}
		})
	}

	// A second machine.
	b, baddr, bid := startJoin(t, dir, "b", env, append([]string{"--invite", invite(t, env, cdata), "--join", caddr}, poll...)...)
	// A third, which later only submits: its kept revocation list stays
	// as it was when its peer stopped.
	c, _, _ := startJoin(t, dir, "c", env, append([]string{"--invite", invite(t, env, cdata), "--join", caddr}, poll...)...)
	c.Stop(5 * time.Second)

	// Member a holds the secret: a certificate derived from it (what the
	// default mode accepts) or self-signed is a second identity, refused
	// at the handshake by the creator and by b; a's issued one passes.
	m, err := trust.LoadMembership(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	aID, err := trust.LoadIdentity(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	aCreds, err := m.Creds(aID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := trust.ParseToken(m.Token)
	if err != nil {
		t.Fatal(err)
	}
	minted, err := trust.Ephemeral(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := probe(caddr, "127.0.0.3", aCreds.ClientTLS()); err != nil {
		t.Fatalf("a's issued certificate refused by the creator: %v", err)
	}
	if err := probe(caddr, "127.0.0.4", minted.ClientTLS()); err == nil {
		t.Fatal("the creator accepted a certificate derived from the secret")
	}
	waitStderr(t, creator, regexp.MustCompile(`refused a connection.*remote=127\.0\.0\.4:\d+ err=.*not from this swarm`))
	if err := probe(baddr, "127.0.0.4", selfSignedTLS(t)); err == nil {
		t.Fatal("b accepted a self-signed certificate")
	}
	waitStderr(t, b, regexp.MustCompile(`refused a connection.*remote=127\.0\.0\.4:\d+ err=.*not from this swarm`))
	// A node run from the secret alone is no member either.
	t0 = time.Now()
	mint, maddr, _ := startJoin(t, dir, "mint", []string{"P2PC_SWARM=" + m.Token, "XDG_CONFIG_HOME=" + filepath.Join(dir, "cfg-mint")}, "--join", caddr)
	t.Logf("for comparison, a start with the secret alone: %v to listening", time.Since(t0).Round(time.Millisecond))
	waitStderr(t, mint, regexp.MustCompile(`not from this swarm`))
	if on := runOn("out2", maddr, baddr); byName(on, "mint") != 0 {
		t.Fatalf("attempts by peer %v: the minted identity took part", on)
	}

	// Revoke a: the creator refuses it at once, b once its list arrived.
	if err := probe(baddr, "127.0.0.6", aCreds.ClientTLS()); err != nil {
		t.Fatalf("before revocation, b refuses a: %v", err)
	}
	if r := p2pcEnv(t, env, "--data", cdata, "swarm", "revoke", aid); r.code != 0 {
		t.Fatalf("revoke: exit %d\n%s", r.code, r.stderr)
	}
	r := p2pcEnv(t, env, "--data", cdata, "swarm", "members")
	if r.code != 0 || !regexp.MustCompile(regexp.QuoteMeta(aid)+`\s+a\s.*revoked`).MatchString(r.stdout) || !regexp.MustCompile(regexp.QuoteMeta(bid)+`\s+b\s.*member`).MatchString(r.stdout) {
		t.Fatalf("swarm members: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitStderr(t, b, regexp.MustCompile(`revocation list applied.* revoked=1`))
	if err := probe(baddr, "127.0.0.6", aCreds.ClientTLS()); err == nil {
		t.Fatal("after revocation, b accepts a")
	}
	waitStderr(t, b, regexp.MustCompile(`refused a connection.*remote=127\.0\.0\.6:\d+ err=.*revoked by the swarm's creator`))
	if on := runOn("out3", aaddr, baddr); len(on) != 1 || on["b@"+bid] == 0 {
		t.Fatalf("attempts by peer %v, want b only (a revoked, the creator takes none)", on)
	}
	// A run from c's folder fetches the list from the creator at start.
	if on := runFrom(filepath.Join(dir, "c"), "out4", aaddr, baddr); len(on) != 1 || on["b@"+bid] == 0 {
		t.Fatalf("attempts by peer %v of c's run, want b only (a revoked)", on)
	}

	// The join line again on an admitted folder starts without admission
	// (its code is spent).
	a.Stop(5 * time.Second)
	a2, _, a2id := startJoin(t, dir, "a", env, "--invite", inv, "--join", caddr)
	if a2id != aid || strings.Contains(a2.Stderr(), "admitted") {
		t.Fatalf("restart with the same line: ID %s (was %s)\n%s", a2id, aid, a2.Stderr())
	}
}

// byName counts the attempts of the peers named name ("name@ID" keys).
func byName(on map[string]int, name string) int {
	n := 0
	for k, v := range on {
		if strings.HasPrefix(k, name+"@") {
			n += v
		}
	}
	return n
}

// probe opens a TLS connection to a node's port from the local address
// src with cfg and reads its first byte: nil when the node accepted the
// certificate (gRPC's server speaks first), the error when it refused.
// Each probe's source address is its own: a node logs one refusal per
// address.
func probe(addr, src string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	cfg.VerifyConnection = nil // the client believes any server: only the server's check is tried
	cfg.NextProtos = []string{"h2"}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// selfSignedTLS is a client configuration with a fresh key's
// self-signed certificate.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
