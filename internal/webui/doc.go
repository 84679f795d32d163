// Package webui serves the live web view of a job (`p2pc run --ui`) or of
// a peer (`p2pc join --ui`): one page from assets embedded in the binary,
// fed by server-sent events. docs/webui.md lists the endpoints and the
// access rules.
//
// The view reads, it never drives: the coordinator and the node give it
// small read-only interfaces (Job, Swarm, Served). A hub builds a
// snapshot from them only while a page is connected, at most every
// Config.Every, and within a budget of the time it may hold the job's
// lock. A snapshot scans the tasks one at a time and never holds the
// whole job. A client is sent only the sections that changed, so a slow
// client gets fewer, newer updates, never a backlog.
//
// Anyone on the machine may read on a loopback address; elsewhere a read
// needs the UI token. Every action needs the token, a POST and the header
// "X-P2PC-UI: 1". The token is derived from the swarm secret and is never
// the secret itself.
package webui
