// Package discovery finds p2pc peers and keeps the live set.
//
// Two layers:
//
//   - Finding: every source of peers sits behind the tiny Finder
//     interface. Static is a fixed list (--join addresses, routed
//     networks, tests); Resolver turns static addresses into peers by
//     asking each who it is (the node package asks with the peer
//     protocol's Info call, the one resolver of `p2pc join`, `run` and
//     `peers`) and keeps the answers; MDNS announces this node and browses for the
//     others on the LAN with multicast DNS (github.com/hashicorp/mdns).
//   - Keeping: Membership is a github.com/hashicorp/memberlist cluster
//     (SWIM gossip with failure detection). It spreads each member's
//     metadata (gRPC address, OS/arch, slots) and reports joins, updates,
//     leaves and deaths. Membership.JoinFrom feeds what a Finder finds
//     into it, so nodes found by mDNS, by --join and by gossip end up in
//     one cluster.
//
// # mDNS records
//
// A node announces one instance of the DNS-SD service _p2pc._tcp in the
// domain local.:
//
//	_p2pc._tcp.local.             PTR  <label>._p2pc._tcp.local.
//	<label>._p2pc._tcp.local.     SRV  10 1 <gRPC port> <label>.p2pc.local.
//	<label>._p2pc._tcp.local.     TXT  "name=<node name>" "grpc=<host:port>" "gossip=<host:port>" "v=<peer protocol version>"
//	<label>.p2pc.local.           A / AAAA  <announced IPs>
//
// <label> is the node name with characters outside [A-Za-z0-9_-] replaced
// by '-' (plus a short hash of the name when it changed, so that
// different names stay different); the TXT name= keeps the name as it is.
// The TXT record is what a browser reads: grpc= and gossip= are complete
// addresses (an unspecified host, 0.0.0.0 or ::, is replaced by the first
// announced IP, and by a browser with the answer's A record). Unknown TXT
// keys are ignored, so fields can be added.
//
// The announced IPs (MDNSConfig.IPs) default to the addresses of
// MDNSConfig.Interface if one is given, else the concrete host of the gRPC
// address, else the source address the kernel picks for the mDNS group,
// else the first IPv4 address of an interface that is up and multicasts,
// else 127.0.0.1. Interface nil leaves the multicast interface to the
// system's route for 224.0.0.251: the default route's interface on a LAN
// host, loopback in a test namespace (below).
//
// Browsing works around two limits of the library: its query always waits
// its whole timeout (MDNSConfig.QueryTimeout, 1 s by default), and it
// drops an answer when the entries channel is full. Each round therefore
// gives the library a 256-entry buffer and reads it concurrently, using
// every answer as it arrives (Browse calls its callback then). Browsed
// peers are cached and forgotten when not seen again for MDNSConfig.TTL
// (30 s by default; the records themselves carry the library's fixed
// 120 s). The library sends no goodbye packets, so a stopped node
// disappears from Find only when its entry expires. Only IPv4 is queried
// unless MDNSConfig.IPv6 is set. Find and Browse leave out the node's own
// announcement.
//
// # Membership metadata
//
// Meta travels in memberlist's node metadata as compact JSON with
// one-letter keys and zero values left out, e.g.
//
//	{"g":"10.0.0.1:7000","o":"linux","a":"amd64","v":"v0.1.0","p":3,"s":8,"f":5}
//
// g gRPC address, o OS, a architecture, v release, p peer protocol
// version, s slots, f free slots, and l=true while the member is leaving.
// The name is the memberlist node name and is not repeated. memberlist
// allows 512 bytes (memberlist.MetaMaxSize); Start and UpdateMeta fail on
// more, and the metadata in force stays as it was. Config.Meta is read by
// Start, UpdateMeta and Leave only; memberlist is served the encoding
// they made (it asks under its own locks, where user code must not run).
//
// A member whose Meta.Proto differs from this node's, or whose metadata
// cannot be read (a foreign memberlist), is listed with Compatible false
// and a warning is logged once; the scheduler must skip it. Packets carry
// the memberlist label "p2pc", so other memberlist clusters on the LAN
// (Consul, Serf) never mix with p2pc's.
//
// Gossip is sealed: Config.SecretKey (the swarm's key, derived from its
// secret by package trust) is memberlist's one keyring key, and every UDP
// packet and TCP stream is AES-256-GCM under it, with incoming and
// outgoing verification on. A node of another swarm (or none) cannot join,
// read or forge gossip; mDNS announcements carry no secret, so a foreign
// one leads only to a failed join. Gossip of another swarm on the LAN (it
// does not open with this swarm's key) is logged once per source host, at
// WARN, and from then on counted at DEBUG (count=N), not logged every time
// it arrives. Meta.ID is the node ID a member claims
// ("i"); only members can gossip it, and connections prove it again.
//
// Node names must be unique. A node that joins a cluster where its name is
// taken at another address is refused by memberlist; Join (and JoinFrom)
// return an error wrapping ErrNameTaken that names the other member's
// address, and the node has to restart under another name. A member that
// died comes back under its name at a new address after
// Timing.DeadNodeReclaimTime.
//
// # Healing after a partition
//
// memberlist forgets a member GossipToTheDeadTime after declaring it dead
// and never contacts it again by itself, so a partition longer than that
// would leave two clusters for good. Every member therefore remembers the
// gossip address of every other member it has seen and, while one is not
// alive, joins that address again: 1 s after its death, then on a backoff
// doubling to 4 s, until it is back (either side's join merges the two
// clusters), it leaves gracefully (no longer called back), or it has not
// answered for 10 minutes (forgotten, logged). JoinFrom does the same for
// what its Finder finds (static --join peers, mDNS answers) at its own
// period, and tells a Resolver to ask a static peer again when joining
// its cached gossip address did not make it a member (a restarted peer
// gossips on a new port). A healed link thus makes one cluster again
// within about 5 s (measured by the chaos suite's partition scenario).
//
// # Member states and events
//
// Members lists the live members, this node included, as "alive" or
// "suspect". memberlist v0.7.0 does not expose its suspect state (the
// State of the nodes it returns is never set), so "suspect" means that one
// of this node's own probes of the member failed (memberlist logs it) and
// no answer, join or update has come from the member since. The member
// table is fed by memberlist's events, never read from memberlist's own
// node structures, which its goroutines keep writing.
//
// Events reports the other members' changes: Join (new, or back after
// dying), Update (metadata changed), Leave (left with Leave) and Dead
// (declared failed). memberlist's leave message alone looks like a death
// to the receivers, so Leave first sends a leave note (a memberlist user
// message, sealed like all gossip) straight to every member it knows,
// who report the Leave at once; then it queues the leave message and
// waits only until gossip has carried it one round (GossipNodes
// packets, at most about GossipInterval), not for all its
// retransmissions: a leaving `p2pc run` does not keep its user waiting
// (it gossips every 10 ms, SubmitterTiming, so that round is short).
// A member that missed the note learns the leave from the message; one
// that missed both finds the silence by probing and reports Dead. A death
// is reported 250 ms after memberlist declares it (deadGrace): memberlist
// reads queued messages last in, first out, so a note that came with the
// leave message is read just after it and still makes it a Leave. The
// leaving mark (l) in the metadata is still set for members of older
// versions, which know a leave only by it. The channel holds 1024 events; when it is full the
// oldest is dropped (and the drop logged), so a slow reader never stalls
// memberlist. Close closes it.
//
// # Timing
//
// LANTiming (the default): probe every 500 ms, direct ack timeout 250 ms,
// 3 indirect probes, suspicion 2 x max(1, log10 N) x 500 ms = 1 s below 10
// members (2 s at 100), gossip every 100 ms to 3 members, push/pull every
// 15 s. Measured on this machine (3 members on 127.0.0.1, 15 runs: a
// member closed without leaving, a member process stopped with SIGSTOP,
// one killed with SIGKILL): the others report Dead 1.4-2.7 s after the
// member went silent. The time is the wait for a probe to hit the silent
// member, the probe round, then the suspicion timeout. memberlist's own
// LAN defaults take 5-8 s.
//
// LoopbackTiming (tests, benchmarks on one machine): probe every 200 ms,
// suspicion 600 ms-1.2 s; measured 0.8-1.3 s to Dead.
//
// A metadata update (UpdateMeta) reaches the other members in about
// 0.3 s with LoopbackTiming (measured, 3 members).
//
// # Network namespaces (tests)
//
// mDNS must never run in the machine's root network namespace: its
// multicast route leaves through the real network card. Every test that
// multicasts runs in a private namespace that the test binary makes
// itself: the package's TestMain calls harness.MainInNetns, which
// re-executes the test binary under `unshare --net` with loopback up and
// 224.0.0.0/4 routed to it, and each such test starts with
// harness.RequirePrivateNetns, which skips it (saying why) anywhere else,
// e.g. without root. Member processes started by the tests inherit the
// namespace, so several real processes find each other there by mDNS
// alone. Membership tests use 127.0.0.1 only. `p2pc join` on a real LAN
// multicasts on purpose.
package discovery
