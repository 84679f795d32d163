package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CAKeyFile is the invites-mode CA key's file in the creator's data
// folder (PKCS#8 PEM, mode 0600). No other machine holds it.
const CAKeyFile = "swarm-ca.key"

// CA is the signing key of an invites-mode swarm.
type CA struct{ key ed25519.PrivateKey }

// NewCA makes a random CA key and saves it in dir; it refuses to replace
// one (the error wraps fs.ErrExist).
func NewCA(dir string) (*CA, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("swarm CA key: %w", err)
	}
	if err := writeKeyFile(filepath.Join(dir, CAKeyFile), key); err != nil {
		return nil, fmt.Errorf("swarm CA key: %w", err)
	}
	return &CA{key: key}, nil
}

// LoadCA reads dir's CA key; without one the error wraps fs.ErrNotExist.
func LoadCA(dir string) (*CA, error) {
	key, err := readKeyFile(filepath.Join(dir, CAKeyFile), "swarm CA key")
	if err != nil {
		return nil, err
	}
	return &CA{key: key}, nil
}

// Public is the CA's public key, which every member holds.
func (ca *CA) Public() ed25519.PublicKey { return ca.key.Public().(ed25519.PublicKey) }

// Issue signs a member certificate for pub.
func (ca *CA) Issue(pub ed25519.PublicKey) ([]byte, error) { return signLeaf(ca.key, pub) }

// ---------------------------------------------------------------- invitation

// InvitePrefix opens every invitation; its digit is the format version.
const InvitePrefix = "p2pcinv1-"

// CodeSize is the size of an invitation's one-time code.
const CodeSize = 16

// Invitation is what a newcomer needs to join an invites-mode swarm. It
// holds no secret beyond its one-time code: the swarm secret comes from
// the creator once the code is redeemed, so a spent invitation (on a
// command line, in a shell history) gives nothing.
type Invitation struct {
	CA   ed25519.PublicKey // the swarm CA's public key
	Code [CodeSize]byte    // the one-time code
	Addr string            // the creator's admission address, host:port
}

func inviteCheck(body []byte) []byte {
	h := sha256.New()
	h.Write([]byte("p2pc invite check v1\x00"))
	h.Write(body)
	return h.Sum(nil)[:checkSize]
}

// Token is the invitation's printable form, "p2pcinv1-...".
func (inv Invitation) Token() string {
	body := slices.Concat(inv.CA, inv.Code[:], []byte(inv.Addr))
	return InvitePrefix + b32.EncodeToString(append(inviteCheck(body), body...))
}

// ParseInvitation parses an invitation token; its errors say what is
// wrong in one line.
func ParseInvitation(tok string) (Invitation, error) {
	var inv Invitation
	t := strings.ToLower(strings.TrimSpace(tok))
	if !strings.HasPrefix(t, InvitePrefix) {
		return inv, fmt.Errorf("invitation: does not start with %q", InvitePrefix)
	}
	raw, err := b32.DecodeString(t[len(InvitePrefix):])
	fixed := checkSize + ed25519.PublicKeySize + CodeSize
	if err != nil || len(raw) <= fixed {
		return inv, errors.New("invitation: malformed or cut short (copy the whole line again)")
	}
	body := raw[checkSize:]
	if string(raw[:checkSize]) != string(inviteCheck(body)) {
		return inv, errors.New("invitation: checksum does not match (a typo? copy the whole line again)")
	}
	inv.CA = ed25519.PublicKey(slices.Clone(body[:ed25519.PublicKeySize]))
	body = body[ed25519.PublicKeySize:]
	copy(inv.Code[:], body)
	inv.Addr = string(body[CodeSize:])
	return inv, nil
}

// ---------------------------------------------------------------- membership

// MembershipFile holds, in a member's data folder, what makes the node a
// member of an invites-mode swarm (mode 0600).
const MembershipFile = "swarm-member.json"

// Membership is a node's invites-mode membership.
type Membership struct {
	Token string `json:"token"` // the swarm secret's token (gossip key)
	CA    []byte `json:"ca"`    // the swarm CA's public key
	Cert  []byte `json:"cert"`  // this node's certificate, DER, issued by CA
	// Creator is the creator's admission address, where revocations are
	// fetched ("" on the creator itself).
	Creator string `json:"creator,omitempty"`
}

// LoadMembership reads dir's membership; without one the error wraps
// fs.ErrNotExist.
func LoadMembership(dir string) (*Membership, error) {
	path := filepath.Join(dir, MembershipFile)
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("swarm membership %s has mode %04o, open to other users: run chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("swarm membership: %w", err)
	}
	var m Membership
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("swarm membership %s: %w", path, err)
	}
	if len(m.CA) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("swarm membership %s: CA key of %d bytes", path, len(m.CA))
	}
	return &m, nil
}

// Save writes the membership into dir (mode 0600), atomically.
func (m *Membership) Save(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("save swarm membership: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save swarm membership: %w", err)
	}
	if err := WriteFile(filepath.Join(dir, MembershipFile), append(b, '\n')); err != nil {
		return fmt.Errorf("save swarm membership: %w", err)
	}
	return nil
}

// Creds are the credentials the membership gives identity id.
func (m *Membership) Creds(id *Identity) (*Creds, error) {
	s, err := ParseToken(m.Token)
	if err != nil {
		return nil, fmt.Errorf("swarm membership: %w", err)
	}
	return NewIssuedCreds(s, id, ed25519.PublicKey(m.CA), m.Cert)
}

// ---------------------------------------------------------------- registry

// Errors of Registry.Redeem, as the newcomer is told them.
var (
	ErrInviteUnknown = errors.New("invitation code unknown to the swarm's creator (mistyped, or made by another creator)")
	ErrInviteUsed    = errors.New("invitation already used: each admits one machine; run 'p2pc swarm invite' on the creator for another")
	ErrInviteExpired = errors.New("invitation expired: run 'p2pc swarm invite' on the creator for a new one")
	ErrIDRevoked     = errors.New("this node ID was revoked by the swarm's creator")
)

// Registry is the creator's record of invitations and issued identities,
// in DATA/ca: invites/HASH (pending, HASH the SHA-256 of the code),
// used/HASH (redeemed), members/ID.json (one per issued identity). Each
// change is one file created, renamed or replaced, so the creator's
// `p2pc join` (which redeems) and its `p2pc swarm` commands (which invite
// and revoke) need no lock between them.
type Registry struct {
	dir string
	CA  *CA
}

// Member is an issued identity.
type Member struct {
	ID      NodeID    `json:"id"`
	Name    string    `json:"name"`
	Issued  time.Time `json:"issued"`
	Revoked time.Time `json:"revoked,omitzero"`
}

type pendingInvite struct {
	Expires time.Time `json:"expires"`
}

// OpenRegistry opens the registry of the creator whose data folder is
// dataDir; without a CA key there the error wraps fs.ErrNotExist.
func OpenRegistry(dataDir string) (*Registry, error) {
	ca, err := LoadCA(dataDir)
	if err != nil {
		return nil, err
	}
	r := &Registry{dir: filepath.Join(dataDir, "ca"), CA: ca}
	for _, sub := range []string{"invites", "used", "members"} {
		if err := os.MkdirAll(filepath.Join(r.dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("swarm registry: %w", err)
		}
	}
	return r, nil
}

func codeHash(code [CodeSize]byte) string {
	h := sha256.Sum256(append([]byte("p2pc invite code v1\x00"), code[:]...))
	return hex.EncodeToString(h[:])
}

// Invite makes a one-time code valid until now+ttl.
func (r *Registry) Invite(ttl time.Duration, now time.Time) ([CodeSize]byte, error) {
	var code [CodeSize]byte
	if _, err := rand.Read(code[:]); err != nil {
		return code, fmt.Errorf("invitation: %w", err)
	}
	b, _ := json.Marshal(pendingInvite{Expires: now.Add(ttl).UTC()})
	if err := WriteFile(filepath.Join(r.dir, "invites", codeHash(code)), b); err != nil {
		return code, fmt.Errorf("invitation: %w", err)
	}
	return code, nil
}

// Redeem spends code (once) and issues a certificate for pub, recording
// the member under name.
func (r *Registry) Redeem(code [CodeSize]byte, pub ed25519.PublicKey, name string, now time.Time) ([]byte, error) {
	h := codeHash(code)
	pending := filepath.Join(r.dir, "invites", h)
	b, err := os.ReadFile(pending)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(r.dir, "used", h)); err == nil {
			return nil, ErrInviteUsed
		}
		return nil, ErrInviteUnknown
	}
	if err != nil {
		return nil, fmt.Errorf("invitation: %w", err)
	}
	var p pendingInvite
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("invitation %s: %w", pending, err)
	}
	if now.After(p.Expires) {
		os.Remove(pending)
		return nil, ErrInviteExpired
	}
	id := IDOf(pub)
	if m, err := r.member(id); err == nil && !m.Revoked.IsZero() {
		return nil, ErrIDRevoked
	}
	// The rename spends the code: of two redeemers, one wins.
	if err := os.Rename(pending, filepath.Join(r.dir, "used", h)); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrInviteUsed
	} else if err != nil {
		return nil, fmt.Errorf("invitation: %w", err)
	}
	der, err := r.CA.Issue(pub)
	if err != nil {
		return nil, err
	}
	if err := r.Add(id, name, now); err != nil {
		return nil, err
	}
	return der, nil
}

// Add records an issued identity.
func (r *Registry) Add(id NodeID, name string, now time.Time) error {
	return r.put(Member{ID: id, Name: name, Issued: now.UTC()})
}

func (r *Registry) put(m Member) error {
	b, _ := json.Marshal(m)
	if err := WriteFile(filepath.Join(r.dir, "members", m.ID.String()+".json"), b); err != nil {
		return fmt.Errorf("swarm registry: %w", err)
	}
	return nil
}

func (r *Registry) member(id NodeID) (Member, error) {
	var m Member
	b, err := os.ReadFile(filepath.Join(r.dir, "members", id.String()+".json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("swarm registry: member %s: %w", id, err)
	}
	return m, nil
}

// Members lists the issued identities, oldest first.
func (r *Registry) Members() ([]Member, error) {
	ents, err := os.ReadDir(filepath.Join(r.dir, "members"))
	if err != nil {
		return nil, fmt.Errorf("swarm registry: %w", err)
	}
	var out []Member
	for _, e := range ents {
		id, err := ParseNodeID(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue // a temporary file
		}
		m, err := r.member(id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return a.Issued.Compare(b.Issued) })
	return out, nil
}

// Revoke marks an issued identity revoked.
func (r *Registry) Revoke(id NodeID, now time.Time) error {
	m, err := r.member(id)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("revoke %s: not an identity this creator issued ('p2pc swarm members' lists them)", id)
	}
	if err != nil {
		return err
	}
	if !m.Revoked.IsZero() {
		return nil
	}
	m.Revoked = now.UTC()
	return r.put(m)
}

// Revoked lists the revoked node IDs.
func (r *Registry) Revoked() ([]NodeID, error) {
	ms, err := r.Members()
	if err != nil {
		return nil, err
	}
	var ids []NodeID
	for _, m := range ms {
		if !m.Revoked.IsZero() {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// ---------------------------------------------------------------- revocations

// Revocations is the creator's list of revoked node IDs, signed by the CA.
type Revocations struct {
	At  time.Time `json:"at"`
	IDs []NodeID  `json:"ids"`
}

type signedRevocations struct {
	List []byte `json:"list"` // JSON of Revocations
	Sig  []byte `json:"sig"`  // Ed25519 over revocationLabel + List
}

const revocationLabel = "p2pc revocations v1\x00"

// RevocationsFile keeps a member's last verified revocation list.
const RevocationsFile = "swarm-revoked.json"

// Sign returns the list signed by the CA.
func (ca *CA) Sign(rv Revocations) []byte {
	list, _ := json.Marshal(rv)
	b, _ := json.Marshal(signedRevocations{List: list, Sig: ed25519.Sign(ca.key, append([]byte(revocationLabel), list...))})
	return b
}

// OpenRevocations verifies a signed list under caPub.
func OpenRevocations(caPub ed25519.PublicKey, b []byte) (Revocations, error) {
	var s signedRevocations
	var rv Revocations
	if err := json.Unmarshal(b, &s); err != nil {
		return rv, fmt.Errorf("revocation list: %w", err)
	}
	if !ed25519.Verify(caPub, append([]byte(revocationLabel), s.List...), s.Sig) {
		return rv, errors.New("revocation list: not signed by this swarm's CA")
	}
	if err := json.Unmarshal(s.List, &rv); err != nil {
		return rv, fmt.Errorf("revocation list: %w", err)
	}
	return rv, nil
}

// SaveRevocations keeps a signed list in dir (checked on load).
func SaveRevocations(dir string, signed []byte) error {
	if err := WriteFile(filepath.Join(dir, RevocationsFile), signed); err != nil {
		return fmt.Errorf("save revocation list: %w", err)
	}
	return nil
}

// LoadRevocations reads and verifies dir's kept list; without one the
// error wraps fs.ErrNotExist.
func LoadRevocations(dir string, caPub ed25519.PublicKey) (Revocations, error) {
	b, err := os.ReadFile(filepath.Join(dir, RevocationsFile))
	if err != nil {
		return Revocations{}, err
	}
	return OpenRevocations(caPub, b)
}
