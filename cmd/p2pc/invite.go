package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/trust"
)

// The invites mode (see docs/protocol.md, "Invite-only swarms"): the
// swarm's CA key is random and stays in its creator's data folder; each
// member's certificate is issued once per invitation by the creator's
// `p2pc join`, which serves the admission protocol on --admit-listen.

// admitAddrFile holds, in the creator's data folder, the admission
// address its running `p2pc join` advertises (read by `swarm invite`).
const admitAddrFile = "admit.addr"

// membership is the data folder's invites-mode membership, nil in the
// secret-derived mode.
func (g *Globals) membership() (*trust.Membership, error) {
	m, err := trust.LoadMembership(g.Data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, withCode(exitBadInput, err)
	}
	return m, nil
}

// secret is the swarm secret: the membership's in the invites mode, else
// SwarmFlags'.
func (g *Globals) secret() (trust.Secret, bool, error) {
	m, err := g.membership()
	if err != nil || m == nil {
		if err != nil {
			return trust.Secret{}, false, err
		}
		return g.SwarmFlags.secret()
	}
	s, err := trust.ParseToken(m.Token)
	if err != nil {
		return s, false, withCode(exitBadInput, fmt.Errorf("%s: %w", filepath.Join(g.Data, trust.MembershipFile), err))
	}
	return s, true, nil
}

// issuedCreds are the node's invites-mode credentials, with the
// revocations known here applied: the creator's registry, or the list a
// member last fetched.
func (g *Globals) issuedCreds(m *trust.Membership) (*trust.Creds, error) {
	id, err := trust.LoadIdentity(g.Data)
	if err != nil {
		return nil, withCode(exitBadInput, err)
	}
	c, err := m.Creds(id)
	if err != nil {
		return nil, withCode(exitBadInput, fmt.Errorf("%s: %w", filepath.Join(g.Data, trust.MembershipFile), err))
	}
	if reg, err := trust.OpenRegistry(g.Data); err == nil {
		ids, err := reg.Revoked()
		if err != nil {
			return nil, err
		}
		c.SetRevoked(ids)
	} else if rv, err := trust.LoadRevocations(g.Data, c.CAPublic()); err == nil {
		c.SetRevoked(rv.IDs)
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.Logger.Warn("kept revocation list ignored", "err", err)
	}
	return c, nil
}

// initInvites is `p2pc swarm init --invites`: a random CA key in the data
// folder, and this node's own certificate.
func initInvites(g *Globals) error {
	if m, err := g.membership(); err != nil || m != nil {
		if err != nil {
			return err
		}
		return withCode(exitBadInput, fmt.Errorf("%s already holds a swarm membership: 'p2pc swarm show' says which (use another --data for a new swarm)", g.Data))
	}
	s, err := trust.NewSecret()
	if err != nil {
		return err
	}
	ca, err := trust.NewCA(g.Data)
	if errors.Is(err, fs.ErrExist) {
		return withCode(exitBadInput, fmt.Errorf("%s already holds a swarm CA key (%s)", g.Data, trust.CAKeyFile))
	}
	if err != nil {
		return err
	}
	reg, err := trust.OpenRegistry(g.Data)
	if err != nil {
		return err
	}
	id, err := trust.LoadIdentity(g.Data)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	der, err := ca.Issue(id.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	if err := reg.Add(id.ID, host+" (creator)", time.Now()); err != nil {
		return err
	}
	m := &trust.Membership{Token: s.Token(), CA: ca.Public(), Cert: der}
	if err := m.Save(g.Data); err != nil {
		return err
	}
	c, err := m.Creds(id)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "p2pc: new invite-only swarm %s; its signing key is %s (mode 0600: it alone admits members, keep it and back it up).\n", c.SwarmID(), filepath.Join(g.Data, trust.CAKeyFile))
	fmt.Fprintln(os.Stderr, "p2pc: start 'p2pc join' on this machine (it admits newcomers), then run 'p2pc swarm invite' once per machine to admit.")
	return nil
}

// showInvites is `p2pc swarm show` in the invites mode.
func showInvites(g *Globals, m *trust.Membership) error {
	c, err := g.issuedCreds(m)
	if err != nil {
		return err
	}
	role := "a member (admitted by the creator at " + m.Creator + ")"
	if m.Creator == "" {
		role = "its creator: 'p2pc swarm invite' admits a machine"
	}
	fmt.Fprintf(os.Stderr, "p2pc: invite-only swarm %s; this node's ID %s; this node is %s\n", c.SwarmID(), c.ID(), role)
	fmt.Fprintf(os.Stderr, "p2pc: web view token (--ui): %s\n", c.Secret().UIToken())
	return nil
}

// registry opens the creator's registry, saying what to do elsewhere.
func (g *Globals) registry(cmd string) (*trust.Registry, error) {
	reg, err := trust.OpenRegistry(g.Data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, withCode(exitBadInput, fmt.Errorf("%s holds no swarm signing key: 'p2pc swarm %s' runs on the creator of an invite-only swarm ('p2pc swarm init --invites'), with its --data", g.Data, cmd))
	}
	if err != nil {
		return nil, withCode(exitBadInput, err)
	}
	return reg, nil
}

// SwarmInviteCmd is `p2pc swarm invite`.
type SwarmInviteCmd struct {
	Expires time.Duration `help:"How long the invitation stays valid." default:"24h"`
	Addr    string        `help:"The creator's admission address the newcomer dials (default: the one its running 'p2pc join' advertises)." placeholder:"HOST:PORT"`
}

// Run prints a one-time join line.
func (c *SwarmInviteCmd) Run(g *Globals) error {
	reg, err := g.registry("invite")
	if err != nil {
		return err
	}
	m, err := g.membership()
	if err != nil {
		return err
	}
	if m == nil {
		return withCode(exitBadInput, fmt.Errorf("%s holds a swarm signing key but no membership (%s)", g.Data, trust.MembershipFile))
	}
	addr := c.Addr
	if addr == "" {
		b, err := os.ReadFile(filepath.Join(g.Data, admitAddrFile))
		if err != nil {
			return withCode(exitBadInput, errors.New("no admission address: start 'p2pc join' on this machine first (it admits newcomers on --admit-listen), or give --addr HOST:PORT"))
		}
		addr = strings.TrimSpace(string(b))
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return withCode(exitBadInput, fmt.Errorf("--addr: %w", err))
	}
	if c.Expires <= 0 {
		return withCode(exitBadInput, errors.New("--expires must be positive"))
	}
	code, err := reg.Invite(c.Expires, time.Now())
	if err != nil {
		return err
	}
	inv := trust.Invitation{CA: reg.CA.Public(), Code: code, Addr: addr}
	fmt.Fprintf(os.Stderr, "p2pc: one-time invitation, valid until %s; it admits one machine through %s (this machine's 'p2pc join' must be running). On the new machine, run:\n", time.Now().Add(c.Expires).Format(time.DateTime), addr)
	fmt.Printf("p2pc join --invite %s\n", inv.Token())
	return nil
}

// SwarmMembersCmd is `p2pc swarm members`.
type SwarmMembersCmd struct{}

// Run lists the issued identities.
func (c *SwarmMembersCmd) Run(g *Globals) error {
	reg, err := g.registry("members")
	if err != nil {
		return err
	}
	ms, err := reg.Members()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE ID\tNAME\tISSUED\tSTATE")
	for _, m := range ms {
		state := "member"
		if !m.Revoked.IsZero() {
			state = "revoked " + m.Revoked.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, m.Name, m.Issued.Local().Format(time.DateTime), state)
	}
	return w.Flush()
}

// SwarmRevokeCmd is `p2pc swarm revoke`.
type SwarmRevokeCmd struct {
	ID string `arg:"" help:"The node ID to revoke (as 'p2pc swarm members' lists it)."`
}

// Run revokes one identity.
func (c *SwarmRevokeCmd) Run(g *Globals) error {
	id, err := trust.ParseNodeID(c.ID)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	reg, err := g.registry("revoke")
	if err != nil {
		return err
	}
	if err := reg.Revoke(id, time.Now()); err != nil {
		return withCode(exitBadInput, err)
	}
	fmt.Fprintf(os.Stderr, "p2pc: node %s revoked: this machine's peer refuses it within %s, the other members when they next fetch the list from it (every %s)\n", id, defaultRevocationPoll, defaultRevocationPoll)
	return nil
}

// defaultRevocationPoll is how often a node of an invite-only swarm
// refreshes its revocation list.
const defaultRevocationPoll = 30 * time.Second

// redeemInvite is `p2pc join --invite`: present the one-time code to the
// creator and keep the certificate it issues. A data folder already
// admitted to the invitation's swarm joins as it is.
func redeemInvite(g *Globals, token, name string) error {
	inv, err := trust.ParseInvitation(token)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--invite: %w", err))
	}
	if m, err := g.membership(); err != nil || m != nil {
		if err != nil {
			return err
		}
		if !bytes.Equal(m.CA, inv.CA) {
			return withCode(exitBadInput, fmt.Errorf("--invite: %s already belongs to another invite-only swarm: give another --data", g.Data))
		}
		g.Logger.Info("already a member of the invitation's swarm: the invitation is not used")
		return nil
	}
	id, err := trust.LoadIdentity(g.Data)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	m, err := trust.Redeem(g.Ctx, inv, id, name)
	if errors.Is(err, trust.ErrRefused) {
		return withCode(exitBadInput, fmt.Errorf("--invite: %w", err))
	}
	if err != nil {
		return fmt.Errorf("--invite: %w", err)
	}
	if err := m.Save(g.Data); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "p2pc: admitted to the invite-only swarm as node %s\n", id.ID)
	return nil
}

// serveInvites runs the invites mode's background work for a `p2pc join`
// until ctx ends: on the creator, the admission server (on listen), and
// on every node keepRevocations.
func serveInvites(ctx context.Context, g *Globals, creds *trust.Creds, n *node.Node, listen string, poll time.Duration) error {
	if !creds.Invites() {
		return nil
	}
	log := g.Logger.With("component", "invites")
	reg, err := trust.OpenRegistry(g.Data)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		lis, err := transport.Default().Listen(ctx, listen)
		if err != nil {
			return withCode(exitBadInput, fmt.Errorf("--admit-listen %s: %w", listen, err))
		}
		host, _, _ := net.SplitHostPort(n.Addr())
		_, port, _ := net.SplitHostPort(lis.Addr().String())
		addr := net.JoinHostPort(host, port)
		if err := trust.WriteFile(filepath.Join(g.Data, admitAddrFile), []byte(addr+"\n")); err != nil {
			lis.Close()
			return err
		}
		go func() {
			if err := trust.ServeAdmission(ctx, lis, creds, reg, log); err != nil {
				log.Error("admission server stopped", "err", err)
			}
		}()
		log.Info("admitting newcomers", "addr", addr)
	}
	return keepRevocations(ctx, g, creds, poll)
}

// firstRefresh bounds keepRevocations' first refresh.
const firstRefresh = 3 * time.Second

// keepRevocations keeps creds' revoked IDs current every poll until ctx
// ends: from the creator's registry on the creator, else fetched from the
// creator (and kept in the data folder). The first refresh is done before
// it returns, so that a node (a run's coordinator too) starts with the
// creator's current list when the creator answers.
func keepRevocations(ctx context.Context, g *Globals, creds *trust.Creds, poll time.Duration) error {
	if !creds.Invites() {
		return nil
	}
	m, err := g.membership()
	if err != nil {
		return err
	}
	k := &revocationKeeper{log: g.Logger.With("component", "invites"), creds: creds}
	reg, err := trust.OpenRegistry(g.Data)
	switch {
	case err == nil:
		k.get = func(context.Context) ([]trust.NodeID, error) { return reg.Revoked() }
	case errors.Is(err, fs.ErrNotExist):
		k.get = func(ctx context.Context) ([]trust.NodeID, error) {
			rv, signed, err := trust.FetchRevocations(ctx, m.Creator, creds)
			if err != nil {
				return nil, err
			}
			if err := trust.SaveRevocations(g.Data, signed); err != nil {
				k.log.Warn("revocation list not kept", "err", err)
			}
			return rv.IDs, nil
		}
	default:
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, firstRefresh)
	k.refresh(fctx)
	cancel()
	go k.loop(ctx, poll)
	return nil
}

// revocationKeeper applies the revoked IDs get returns; a failure keeps
// the last list and is logged once until it heals.
type revocationKeeper struct {
	log     *slog.Logger
	creds   *trust.Creds
	get     func(context.Context) ([]trust.NodeID, error)
	last    []trust.NodeID
	failing bool
}

func (k *revocationKeeper) refresh(ctx context.Context) {
	ids, err := k.get(ctx)
	switch {
	case errors.Is(err, context.Canceled):
		return // the node is stopping
	case err != nil:
		if !k.failing {
			k.log.Warn("revocation list not refreshed; keeping the last one", "err", err)
		}
		k.failing = true
	default:
		if k.failing {
			k.log.Info("revocation list refreshed again")
		}
		k.failing = false
		if !slices.Equal(ids, k.last) {
			k.creds.SetRevoked(ids)
			k.log.Info("revocation list applied", "revoked", len(ids))
			k.last = ids
		}
	}
}

// loop refreshes every poll until ctx ends.
func (k *revocationKeeper) loop(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.refresh(ctx)
		}
	}
}
