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
// The author never sees the handshake, gRPC or process management. A
// plugin may also implement Reducer, Describer and Verifier. Calls from
// the task to the node go through Host, an interface the author only
// consumes, so later releases may add methods without breaking plugins.
// One warm plugin process serves many calls, one after another or at once.
// In a job whose spec has spawn:, a task may submit children with Spawn
// and wait for their results with Wait; a waiting task is suspended and
// run again from the start once they are done (fork.go).
//
// This package imports nothing else of p2pc, and plugins/sdk is a Go
// module of its own: a plugin in another repository depends on the SDK,
// go-plugin, gRPC and protobuf only. The wire types and the handshake are
// in package pluginpb; the host's side is p2pc's internal/pluginproto.
// docs/plugin-sdk.md is the guide and describes the protocol.
package sdk
