//go:build linux

package pluginhost

import (
	"context"
	"errors"
	"os"
	"strconv"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// serveOldPlugin serves a plugin as one built against SDK protocol 2
// would: Describe says 2, and RunBatch is not served.
func serveOldPlugin() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginpb.Handshake,
		Plugins:         plugin.PluginSet{pluginpb.PluginName: &oldPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}

type oldPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (oldPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterTaskServer(s, oldServer{})
	return nil
}

func (oldPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin side only")
}

// oldServer has no RunBatch (UnimplementedTaskServer answers it).
type oldServer struct {
	pluginpb.UnimplementedTaskServer
}

func (oldServer) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	return &pluginpb.DescribeResponse{Name: "old", SdkProtocol: 2}, nil
}

func (oldServer) Attach(context.Context, *pluginpb.AttachRequest) (*pluginpb.AttachResponse, error) {
	return &pluginpb.AttachResponse{}, nil
}

func (oldServer) Run(_ context.Context, req *pluginpb.RunRequest) (*pluginpb.RunResponse, error) {
	return &pluginpb.RunResponse{Data: []byte(strconv.Itoa(os.Getpid()) + " " + req.TaskId)}, nil
}
