package trust

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretSize is the size of a swarm secret in bytes.
const SecretSize = 32

// TokenPrefix opens every swarm token; its digit is the format version.
const TokenPrefix = "p2pc1-"

const checkSize = 4

// tokenLen is the length of a token after its prefix.
var tokenLen = b32.EncodedLen(SecretSize + checkSize)

// b32 is lowercase base32 without padding.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Secret is a swarm secret.
type Secret [SecretSize]byte

// ErrNoSecret is returned by LoadSecret when the file does not exist.
var ErrNoSecret = errors.New("no swarm secret")

// NewSecret returns a fresh random secret.
func NewSecret() (Secret, error) {
	var s Secret
	if _, err := rand.Read(s[:]); err != nil {
		return s, fmt.Errorf("new swarm secret: %w", err)
	}
	return s, nil
}

func (s Secret) check() []byte {
	h := sha256.New()
	h.Write([]byte("p2pc token check v1\x00"))
	h.Write(s[:])
	return h.Sum(nil)[:checkSize]
}

// Token is the secret's printable form, "p2pc1-...".
func (s Secret) Token() string {
	return TokenPrefix + b32.EncodeToString(append(s[:], s.check()...))
}

// String never prints the secret.
func (s Secret) String() string { return "swarm " + s.SwarmID() }

// ParseToken parses a token. Surrounding space is ignored, and case.
// Its errors are one line, and say what is wrong.
func ParseToken(tok string) (Secret, error) {
	var s Secret
	t := strings.ToLower(strings.TrimSpace(tok))
	if !strings.HasPrefix(t, TokenPrefix) {
		if strings.HasPrefix(t, "p2pc") && strings.Contains(t, "-") {
			return s, fmt.Errorf("swarm token: unknown version %q (this p2pc reads %q tokens)", t[:strings.Index(t, "-")+1], TokenPrefix)
		}
		return s, fmt.Errorf("swarm token: does not start with %q", TokenPrefix)
	}
	body := t[len(TokenPrefix):]
	if len(body) != tokenLen {
		return s, fmt.Errorf("swarm token: %d characters after %q, want %d", len(body), TokenPrefix, tokenLen)
	}
	for i, r := range body {
		if !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7') {
			return s, fmt.Errorf("swarm token: character %q at position %d is not base32 (a-z, 2-7)", r, len(TokenPrefix)+i+1)
		}
	}
	raw, err := b32.DecodeString(body)
	if err != nil || len(raw) != SecretSize+checkSize {
		return s, fmt.Errorf("swarm token: not base32: %v", err)
	}
	// The last character carries 3 bits and 2 bits of padding: a typo
	// there could decode to the same bytes.
	if b32.EncodeToString(raw) != body {
		return s, fmt.Errorf("swarm token: last character %q is not a valid ending (a typo?)", body[len(body)-1])
	}
	copy(s[:], raw)
	if string(raw[SecretSize:]) != string(s.check()) {
		return Secret{}, errors.New("swarm token: checksum does not match (a typo? copy the whole line again)")
	}
	return s, nil
}

// derive returns n bytes of key material for label.
func (s Secret) derive(label string, n int) []byte {
	k, err := hkdf.Key(sha256.New, s[:], nil, label, n)
	if err != nil {
		panic("trust: hkdf: " + err.Error()) // only for absurd n
	}
	return k
}

// GossipKey is the 32-byte memberlist key (AES-256-GCM) of the swarm.
func (s Secret) GossipKey() []byte { return s.derive("p2pc gossip v1", 32) }

// caKey is the swarm CA's Ed25519 key.
func (s Secret) caKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(s.derive("p2pc swarm ca v1", ed25519.SeedSize))
}

// SwarmID names the swarm without revealing its secret: the first group
// of the swarm CA public key's ID. Two members print the same SwarmID.
func (s Secret) SwarmID() string {
	return swarmIDOf(s.caKey().Public().(ed25519.PublicKey))
}

// DefaultSecretPath is the secret file's default place:
// os.UserConfigDir()/p2pc/swarm.
func DefaultSecretPath() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("swarm file: %w", err)
	}
	return filepath.Join(d, "p2pc", "swarm"), nil
}

// LoadSecret reads a secret file. It fails with ErrNoSecret (wrapped) if
// there is none, and refuses a file that others may read or write.
func LoadSecret(path string) (Secret, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Secret{}, fmt.Errorf("%w: %s does not exist", ErrNoSecret, path)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("swarm file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Secret{}, fmt.Errorf("swarm file %s: not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return Secret{}, fmt.Errorf("swarm file %s has mode %04o, open to other users: run chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, fmt.Errorf("swarm file: %w", err)
	}
	s, err := ParseToken(string(b))
	if err != nil {
		return Secret{}, fmt.Errorf("swarm file %s: %w", path, err)
	}
	return s, nil
}

// SaveSecret writes s to path (mode 0600, its folder 0700 if made),
// replacing what is there atomically.
func SaveSecret(path string, s Secret) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save swarm secret: %w", err)
	}
	if err := WriteFile(path, []byte(s.Token()+"\n")); err != nil {
		return fmt.Errorf("save swarm secret: %w", err)
	}
	return nil
}

// WriteFile replaces path with data (mode 0600) through a temporary file
// renamed into place: a reader sees the old file or the new, whole.
func WriteFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return err
}

// UIToken is the token of the web view (`p2pc run --ui`): derived from
// the secret, so that whoever holds the secret can make it, and it
// cannot be turned back into the secret.
func (s Secret) UIToken() string {
	return "p2pcui-" + b32.EncodeToString(s.derive("p2pc web ui v1", 20))
}
