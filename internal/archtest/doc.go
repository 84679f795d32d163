// Package archtest holds no code, only a test that keeps the import
// arrows of the repository pointing one way. It lists the packages of the
// root module and of the SDK module and fails on a forbidden arrow:
//
//   - the peer (internal/node) never depends on the coordinator
//     (internal/job);
//   - internal/outputs depends on neither the plugin host nor the
//     plugin builder;
//   - no production package depends on harness/..., except harness/...
//     itself and cmd/p2pc's bench.go;
//   - spec imports nothing of this repository, plugins/sdk/... nothing
//     outside plugins/sdk/..., and each plugin nothing but plugins/sdk/....
//
// Only production imports count. The SDK module's build list must not
// hold the root module nor p2pc's heavy requirements.
package archtest
