// Package sdk is the public, stable API for writing p2pc task plugins.
//
// A plugin is an executable that serves one Task over HashiCorp go-plugin
// (gRPC). Its author writes a plain type with a Run method and a one-line
// main:
//
//	type band struct{}
//
//	func (band) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
//		var p struct{ Row int `json:"row"` }
//		if err := req.Decode(&p); err != nil {
//			return nil, err
//		}
//		return &sdk.Result{Data: render(p.Row)}, nil
//	}
//
//	func main() { sdk.Serve(band{}) }
//
// The author never sees the handshake, gRPC or process management. The
// plugin may also implement Reducer (assemble all task outputs into the
// job's final artifact) and Describer (name, version, portability).
//
// Calls from the task to the node go through Host, an interface the
// author only consumes: later releases add methods (messages between
// tasks, job-global variables, checkpoints) without breaking plugins.
//
// Wire protocol: see pluginpb/plugin.proto and docs/plugin-sdk.md. The host
// dials the plugin's Task service; right after the start it serves a Host
// service over go-plugin's broker and passes its ID in Task.Attach. Every
// Run or Reduce carries a call_id that the plugin's callbacks name, so one
// warm plugin process serves many calls, one after another or at once.
//
// This package imports nothing else of p2pc, and plugins/sdk is a Go
// module of its own (github.com/p2pc/p2pc/plugins/sdk) that does not
// require the p2pc module: a plugin in another repository depends on the
// SDK, go-plugin, gRPC and protobuf only (docs/plugin-sdk.md, "Plugins in
// their own repository"). The host's side of the protocol, the plugin
// client, is p2pc's own (internal/pluginproto); the wire types and the
// handshake that both sides share are in package pluginpb.
//
// Params: Request.Decode is lenient (unknown keys ignored, missing ones
// keep their value); Request.DecodeStrict rejects both, for plugins that
// own every key. A reducer reads a task's output with TaskOutput.Data or
// TaskOutput.ReadFile.
// Package sdktest lets an author test a plugin in-process.
package sdk
