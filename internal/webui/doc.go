// Package webui serves the live web view of a job (`p2pc run --ui`) or of
// a peer (`p2pc join --ui`): one page from assets embedded in the binary
// (plain HTML, CSS and JavaScript, an SVG chart; no build step, nothing
// fetched from elsewhere), fed by server-sent events.
//
// The view reads, it does not drive: the coordinator and the node give it
// small read-only interfaces, Job (the job's fields under the
// coordinator's lock, its tasks streamed one at a time: EachTask, and the
// attempts running now: Running), Swarm (the peers as this node sees
// them) and, on a peer, Served (the jobs it serves). A hub builds a snapshot from
// them at most every Config.Every, and no more often than it takes to
// keep the time a snapshot takes under 1 % of the time (a snapshot scans
// every task; it holds one at a time, never the whole job, so a job of a
// million tasks costs its reading, not its memory), and only while a page
// is connected. The task table and the PNG endpoint scan the same way. Each snapshot is cut into sections
// (job, series, peers, failures, partials); a client is sent only the
// sections that changed since it was last sent anything, so a slow client
// gets fewer, newer updates, never a backlog.
//
// Endpoints (docs/webui.md has the full list):
//
//	GET  /                  the page
//	GET  /assets/NAME       its scripts and styles (embedded)
//	GET  /api/events        server-sent events: "update" with changed sections
//	GET  /api/snapshot      the whole current snapshot as JSON
//	GET  /api/tasks         one page of the task table (state, offset, limit)
//	GET  /api/file          a PNG output file of a done task (task, name)
//	GET  /api/access        whether this browser may act (cancel)
//	POST /api/cancel        cancel the job (needs the token)
//
// Access: on a loopback address anyone on the machine may read; anywhere
// else only a request with a token does (query "token", the cookie the
// page sets after a token URL, or "Authorization: Bearer"). The token is
// the UI token derived from the swarm secret (trust.Secret.UIToken), never
// the secret itself: the view is plain HTTP. Actions need a token everywhere, a POST and the
// header "X-P2PC-UI: 1" (which a cross-site form cannot send).
package webui
