// Package plain says in plain words what a network or gRPC error means
// for a user: "nothing listens there (connection refused)", "the name
// does not resolve", "the connection broke" — instead of gRPC's
// "rpc error: code = Unavailable desc = connection error: desc =
// \"transport: Error while dialing: dial tcp ...\"" or "stream terminated
// by RST_STREAM". Messages a user reads are translated at the edge, where
// a gRPC or dial error enters a message; the original stays wrapped (for
// errors.Is and errors.As) and is what debug logs show.
package plain
