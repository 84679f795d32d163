package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// IDSize is the number of key-hash bytes in a node ID.
const IDSize = 15

// NodeID names a node: a hash of its public key.
type NodeID [IDSize]byte

// IDOf is the node ID of a public key.
func IDOf(pub ed25519.PublicKey) NodeID {
	var id NodeID
	sum := sha256.Sum256(pub)
	copy(id[:], sum[:])
	return id
}

func (id NodeID) checkChars() string {
	h := sha256.New()
	h.Write([]byte("p2pc node id check v1\x00"))
	h.Write(id[:])
	return b32.EncodeToString(h.Sum(nil)[:5])[:4]
}

// String is the ID in 7 groups of 4 characters, the last a check group.
func (id NodeID) String() string {
	s := b32.EncodeToString(id[:]) + id.checkChars() // 24 + 4
	var b strings.Builder
	for i := 0; i < len(s); i += 4 {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(s[i : i+4])
	}
	return b.String()
}

// Short is the ID's first group, for logs beside a name.
func (id NodeID) Short() string { return id.String()[:4] }

// IsZero reports whether id is the zero ID (no identity).
func (id NodeID) IsZero() bool { return id == NodeID{} }

// MarshalText implements encoding.TextMarshaler.
func (id NodeID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *NodeID) UnmarshalText(b []byte) error {
	v, err := ParseNodeID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseNodeID parses a node ID as String prints it; dashes, space and
// case do not matter. A typo fails the check group.
func ParseNodeID(s string) (NodeID, error) {
	var id NodeID
	t := strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(s)))
	if len(t) != 28 {
		return id, fmt.Errorf("node ID %q: %d characters, want 28 (7 groups of 4)", s, len(t))
	}
	raw, err := b32.DecodeString(t[:24])
	if err != nil {
		return id, fmt.Errorf("node ID %q: not base32 (a-z, 2-7)", s)
	}
	copy(id[:], raw)
	if id.checkChars() != t[24:] {
		return NodeID{}, fmt.Errorf("node ID %q: check group does not match (a typo?)", s)
	}
	return id, nil
}

// Identity is a node's key and the ID it gives.
type Identity struct {
	Key ed25519.PrivateKey
	ID  NodeID
}

// NewIdentity makes a fresh identity (not saved).
func NewIdentity() (*Identity, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new node key: %w", err)
	}
	return &Identity{Key: key, ID: IDOf(key.Public().(ed25519.PublicKey))}, nil
}

// KeyFile is the identity's file name in a node's data folder.
const KeyFile = "node.key"

// LoadIdentity reads dir/node.key, making it on first use (mode 0600).
// Two processes that start at once on one folder end up with one key.
func LoadIdentity(dir string) (*Identity, error) {
	path := filepath.Join(dir, KeyFile)
	id, err := readIdentity(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	fresh, err := NewIdentity()
	if err != nil {
		return nil, err
	}
	// Link, not rename: the first of two racing processes wins, the
	// other reads its key.
	if err := writeKeyFile(path, fresh.Key); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return readIdentity(path)
}

// writeKeyFile writes key to path (PKCS#8 PEM, mode 0600, its folder
// made 0700) through a temporary file linked into place: it never
// replaces a file already there (the error wraps fs.ErrExist).
func writeKeyFile(path string, key ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".key-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = f.Chmod(0o600)
	if err == nil {
		err = pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(f.Name(), path)
}

// readKeyFile reads an Ed25519 key written by writeKeyFile, refusing a
// file that other users may read.
func readKeyFile(path, what string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s has mode %04o, open to other users: run chmod 600 %s", what, path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s %s: not a PEM private key", what, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s %s: not an Ed25519 key", what, path)
	}
	return key, nil
}

func readIdentity(path string) (*Identity, error) {
	key, err := readKeyFile(path, "node key")
	if err != nil {
		return nil, err
	}
	return &Identity{Key: key, ID: IDOf(key.Public().(ed25519.PublicKey))}, nil
}
