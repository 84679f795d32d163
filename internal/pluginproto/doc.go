// Package pluginproto is the host's side of the p2pc task plugin
// protocol. Plugin is the go-plugin glue that dispenses a *Client, and
// Client runs tasks, reduce steps and checks in a plugin process over
// gRPC while serving that call's Host callbacks to the plugin.
//
// The wire types, the handshake and the task's side live in the
// plugins/sdk module, which plugin authors depend on; this package is
// p2pc's own. docs/plugin-sdk.md describes the protocol.
package pluginproto
