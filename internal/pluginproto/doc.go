// Package pluginproto is the host's side of the p2pc task plugin
// protocol: Plugin, the go-plugin glue that dispenses a *Client, and
// Client, which runs tasks, reduce steps and checks in a plugin process
// over gRPC while serving that call's Host callbacks (progress, partial
// results, messages, job-global variables, checkpoints) to the plugin.
//
// The wire types and the handshake (package pluginpb) and the task's side
// (package sdk: Serve) live in the plugins/sdk module, which plugin
// authors depend on; this package is p2pc's own, so the SDK shows authors
// only what they write against. See docs/plugin-sdk.md for the protocol.
package pluginproto
