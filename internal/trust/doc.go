// Package trust is the swarm's security: the swarm secret and its token,
// the keys derived from it, node identities and the mutual TLS 1.3
// configuration every node-to-node connection uses.
//
// # Swarm secret and token
//
// A swarm is the set of nodes that hold its 256-bit secret. The secret
// travels as a token: "p2pc1-" followed by the lowercase, unpadded base32
// encoding of the 32 secret bytes and 4 check bytes (the first bytes of
// SHA-256 over a domain label and the secret), 58 characters in all, so a
// typo is an error rather than a silent other swarm. The secret file
// holds the token on one line and must have mode 0600.
//
// # Derived keys
//
// HKDF-SHA256 over the secret, with one label per purpose, derives:
//   - the swarm CA key ("p2pc swarm ca v1"): an Ed25519 key every member
//     can compute; it signs member certificates;
//   - the gossip key ("p2pc gossip v1"): 32 bytes for memberlist's
//     keyring (AES-256-GCM on every UDP packet and TCP stream of gossip);
//   - the web view token ("p2pc web ui v1"): 20 bytes, "p2pcui-" and
//     base32, which opens `--ui` pages; the one derived value that is
//     sent (by browsers, over the view's plain HTTP), and it grants only
//     the view.
//
// # Node identities
//
// A node's identity is an Ed25519 key made on first start and kept in its
// data folder (node.key, PKCS#8 PEM, mode 0600). Its node ID is the first
// 15 bytes of SHA-256 of the public key, base32 in groups of four, plus a
// fifth-of-a-group check: 7 groups of 4 characters ("abcd-efgh-...").
//
// # Certificates and TLS
//
// A member signs a certificate for its own node key with the swarm CA key.
// Peers verify it without a clock or host names: the leaf must be an
// Ed25519 certificate whose signature verifies under the swarm CA public
// key; its key then names the peer (the node ID), and TLS 1.3 proves that
// the peer holds that key. Both ends present certificates; TLS 1.3 is the
// only version, session tickets are off, so every connection runs a full
// mutual handshake. Membership of the swarm is all a certificate proves:
// any member can mint one for any key it holds, but no member can take
// another's node ID without its private key.
package trust
