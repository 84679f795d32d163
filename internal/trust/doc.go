// Package trust is the swarm's security: the swarm secret and its token,
// the keys derived from it, node identities, and the mutual TLS 1.3
// configuration of every node-to-node connection.
//
// A swarm is the set of nodes that hold its 256-bit secret. The secret
// travels as a token with a check, so a typo is an error rather than
// another swarm, and its file must have mode 0600. HKDF derives one key
// per purpose from it: the swarm CA key, the gossip key and the web view
// token. Only the web view token is ever sent, and it grants only the view.
//
// A node's identity is an Ed25519 key kept in its data folder; its NodeID
// is derived from the public key. In the default mode each member signs
// its own certificate with the secret-derived CA key. A peer accepts a
// certificate that the swarm CA key signed, and then TLS proves the peer
// holds the certified key, so no member can take another's node ID.
// Certificates check no clock and no host name.
//
// In the invites mode the CA key is random and only the swarm's creator
// holds it (CA); a member holds its public key and the certificate the
// creator issued for its node key on one Invitation (Membership), so a
// member cannot mint a second identity. The creator serves the admission
// protocol (ServeAdmission: a one-time code redeemed for a certificate,
// and the CA-signed list of revoked IDs); Creds refuse the IDs given to
// SetRevoked.
//
// docs/protocol.md, "Swarm trust" and "Invite-only swarms", gives the
// formats and the threat model.
package trust
