// Package discovery finds p2pc peers and keeps the live set.
//
// Finding: every source of peers sits behind the tiny Finder interface.
// Static is a fixed list, Resolver asks static addresses who they are,
// and MDNS announces this node and browses for others on the LAN.
//
// Keeping: Membership is a hashicorp/memberlist cluster (SWIM gossip with
// failure detection). It spreads each member's Meta and reports joins,
// updates, leaves and deaths on Events. JoinFrom feeds what a Finder finds
// into it, so peers found by mDNS, by --join and by gossip form one
// cluster, and it keeps joining members that died, so a cluster split by a
// partition heals.
//
// Invariants: gossip is sealed with the swarm's key, so a node of another
// swarm cannot join, read or forge it. A member whose peer protocol
// differs is listed with Compatible false. Node names are unique: a join
// under a taken name fails with ErrNameTaken. The member table is fed by
// memberlist's events, never read from memberlist's own structures, and
// no user code runs under memberlist's locks. A full Events channel drops
// its oldest event, so a slow reader never stalls memberlist.
//
// mDNS must never run in the machine's root network namespace; tests that
// multicast run in a private one (harness.MainInNetns).
//
// docs/design/discovery.md describes the mDNS records, the metadata,
// healing, leaves and timing.
package discovery
