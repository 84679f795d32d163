// Package archtest holds no code, only a test that keeps the import
// arrows of the repository pointing one way (the rules are in
// archtest_test.go). It runs `go list -json ./...` at the module root,
// plus the SDK module's packages (plugins/sdk is a module of its own), and
// fails on a forbidden arrow:
//
//   - the peer (internal/node) never depends on the coordinator
//     (internal/job): the protocol's constants live in internal/peerpb,
//     and node.Swarm implements job.Swarm structurally;
//   - internal/outputs depends on neither the plugin host nor the
//     plugin builder;
//   - no production package depends on the benchmark harness (harness/...)
//     but harness/... itself and cmd/p2pc, whose only file that imports
//     it is bench.go (`p2pc bench`);
//   - spec imports nothing of this repository, plugins/sdk/... nothing
//     outside plugins/sdk/..., and the plugins (plugins/<name>) nothing
//     but plugins/sdk/....
//
// Only production imports count (test files may import anything). The
// SDK module's build list must not hold the root module nor p2pc's heavy
// requirements (memberlist, mDNS, kong, YAML, SQLite).
package archtest
