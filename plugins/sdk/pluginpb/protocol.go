// Package pluginpb is the p2pc task plugin protocol as both sides speak
// it: the gRPC services and messages generated from plugin.proto, and the
// go-plugin handshake. Plugin authors never use it (package sdk does);
// the p2pc host imports it to talk to plugins.
package pluginpb

import plugin "github.com/hashicorp/go-plugin"

// ProtocolVersion is the go-plugin protocol version of p2pc task plugins.
// It changes only on an incompatible change of the plugin protocol.
const ProtocolVersion = 1

// SDKProtocol is the revision of the plugin protocol within
// ProtocolVersion; it grows when RPCs or fields are added. Revision 2
// added Verify and the Host calls Send, Recv, Load, Store,
// CompareAndSwap, Checkpoint and Resume; revision 3 added RunBatch (a
// host sends a plugin of revision 2 or less single Run calls); revision
// 4 added RunBatchRequest.max_results and hold_us and
// RunBatchResult.more (results sent several to a message; a plugin of
// revision 3 ignores the request's fields and sends each alone, which a
// host reads as before), and RunResponse.started_unix_nano and
// ended_unix_nano (the task's own times in a single Run).
const SDKProtocol = 4

// BatchProtocol is the first revision that serves RunBatch.
const BatchProtocol = 3

// PluginName is the name of the task plugin in go-plugin's plugin set.
const PluginName = "task"

// Handshake is shared by the host and every plugin. The magic cookie is
// not security: it keeps a user from running a plugin by hand.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "P2PC_PLUGIN",
	MagicCookieValue: "4c0a1d2e-p2pc-task-plugin",
}

// MaxCallMsg bounds one message on the Host service: the largest
// checkpoint the SDK allows (16 MiB) plus room for the envelope.
const MaxCallMsg = 16<<20 + 1<<20
