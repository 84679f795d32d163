// Package plain says in plain words what a network or gRPC error means
// for a user, such as "nothing listens there (connection refused)" or "the
// connection broke".
//
// Errors are translated at the edge, where a gRPC or dial error enters a
// message a user reads. The original error stays wrapped for errors.Is
// and errors.As, and debug logs show it.
package plain
