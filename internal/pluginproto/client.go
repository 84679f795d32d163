package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// Plugin is the host's side of go-plugin's glue for a task plugin: put it
// in the client's PluginSet under pluginpb.PluginName; Dispense returns a
// *Client attached to the host callback service it serves over the broker.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
}

var (
	_ plugin.GRPCPlugin   = (*Plugin)(nil)
	_ sdk.Task            = (*Client)(nil)
	_ sdk.Reducer         = (*Client)(nil)
	_ pluginpb.HostServer = (*hostServer)(nil)
)

// GRPCServer is the plugin's business (package sdk serves the task).
func (p *Plugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("pluginproto: the task service is served by the plugin (sdk.Serve)")
}

// GRPCClient returns a *Client, attached to the host callback service it
// serves over the broker.
func (p *Plugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c := &Client{rpc: pluginpb.NewTaskClient(conn), calls: make(map[uint64]sdk.Host)}
	id := broker.NextId()
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(pluginpb.MaxCallMsg), grpc.MaxSendMsgSize(pluginpb.MaxCallMsg))...)
		pluginpb.RegisterHostServer(s, &hostServer{c: c})
		return s
	})
	if _, err := c.rpc.Attach(ctx, &pluginpb.AttachRequest{HostBrokerId: id}); err != nil {
		return nil, fmt.Errorf("attach host callbacks: %w", err)
	}
	return c, nil
}

// ErrRejected is wrapped by Client.Verify when the plugin rejected an
// output (as opposed to failing to check it).
var ErrRejected = errors.New("output rejected by the plugin's check")

func filesToPB(in []sdk.File) []*pluginpb.File {
	out := make([]*pluginpb.File, 0, len(in))
	for _, f := range in {
		out = append(out, &pluginpb.File{Name: f.Name, Path: f.Path})
	}
	return out
}

// Client is the host's handle on a running plugin process. It implements
// Task and Reducer over gRPC; the sdk.Host passed to each call receives that
// call's callbacks. A task's own failure comes back as a *sdk.TaskError; any
// other error means the plugin process or its connection failed.
type Client struct {
	rpc  pluginpb.TaskClient
	next atomic.Uint64

	mu    sync.Mutex
	calls map[uint64]sdk.Host
}

// PluginInfo is what a plugin says of itself.
type PluginInfo struct {
	sdk.Info
	SDKProtocol uint32
	Reduce      bool
	Verify      bool
}

// Describe asks the plugin to describe itself.
func (c *Client) Describe(ctx context.Context) (PluginInfo, error) {
	r, err := c.rpc.Describe(ctx, &pluginpb.DescribeRequest{})
	if err != nil {
		return PluginInfo{}, fmt.Errorf("describe plugin: %w", err)
	}
	return PluginInfo{
		Info:        sdk.Info{Name: r.Name, Version: r.Version, Portable: r.Portable},
		SDKProtocol: r.SdkProtocol,
		Reduce:      r.Reduce,
		Verify:      r.Verify,
	}, nil
}

func (c *Client) register(h sdk.Host) (uint64, func()) {
	id := c.next.Add(1)
	if h == nil {
		return id, func() {}
	}
	c.mu.Lock()
	c.calls[id] = h
	c.mu.Unlock()
	return id, func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}
}

func (c *Client) hostOf(id uint64) sdk.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// Run runs one task in the plugin.
func (c *Client) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	res, _, _, err := c.RunTimed(ctx, req, host)
	return res, err
}

// RunTimed is Run that also returns when the task started and ended in
// the plugin (SDK protocol 4; zero times from an older plugin).
func (c *Client) RunTimed(ctx context.Context, req *sdk.Request, host sdk.Host) (res *sdk.Result, start, end time.Time, err error) {
	id, done := c.register(host)
	defer done()
	resp, err := c.rpc.Run(ctx, &pluginpb.RunRequest{
		CallId:  id,
		JobId:   req.JobID,
		TaskId:  req.TaskID,
		Attempt: uint32(req.Attempt),
		Params:  req.Params,
		Inputs:  filesToPB(req.Inputs),
		WorkDir: req.WorkDir,
	})
	if err == nil && resp.StartedUnixNano > 0 && resp.EndedUnixNano >= resp.StartedUnixNano {
		start, end = time.Unix(0, resp.StartedUnixNano), time.Unix(0, resp.EndedUnixNano)
	}
	res, err = resultFromPB(req.TaskID, resp, err)
	return res, start, end, err
}

// Verify asks the plugin to check an output. It returns nil if the plugin
// accepts it, an error wrapping ErrRejected if it rejects it, and any
// other error if the check could not be made.
func (c *Client) Verify(ctx context.Context, req *sdk.VerifyRequest) error {
	resp, err := c.rpc.Verify(ctx, &pluginpb.VerifyRequest{
		JobId: req.JobID, TaskId: req.TaskID, Params: req.Params,
		Inputs: filesToPB(req.Inputs), Output: filesToPB(req.Output),
	})
	switch {
	case err != nil:
		return fmt.Errorf("call plugin: %w", err)
	case resp.Error != "":
		return &sdk.TaskError{TaskID: req.TaskID, Msg: "verify: " + resp.Error}
	case !resp.Ok:
		return fmt.Errorf("%w: %s", ErrRejected, resp.Reason)
	}
	return nil
}

// Reduce runs the plugin's reduce step.
func (c *Client) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	id, done := c.register(host)
	defer done()
	pb := &pluginpb.ReduceRequest{CallId: id, JobId: req.JobID, Params: req.Params, WorkDir: req.WorkDir}
	for _, t := range req.Tasks {
		pb.Tasks = append(pb.Tasks, &pluginpb.TaskOutput{TaskId: t.TaskID, Params: t.Params, Files: filesToPB(t.Files)})
	}
	resp, err := c.rpc.Reduce(ctx, pb)
	return resultFromPB("reduce", resp, err)
}

func resultFromPB(taskID string, resp *pluginpb.RunResponse, err error) (*sdk.Result, error) {
	if err != nil {
		return nil, fmt.Errorf("call plugin: %w", err)
	}
	if resp.Error != "" {
		return nil, &sdk.TaskError{TaskID: taskID, Msg: resp.Error}
	}
	return &sdk.Result{Data: resp.Data, Files: resp.Files}, nil
}

// hostServer serves the plugin's callbacks in the host.
type hostServer struct {
	pluginpb.UnimplementedHostServer
	c *Client
}

func (s *hostServer) Progress(ctx context.Context, req *pluginpb.ProgressRequest) (*pluginpb.Ack, error) {
	if h := s.c.hostOf(req.CallId); h != nil {
		if err := h.Progress(ctx, req.Fraction, req.Note); err != nil {
			return nil, err
		}
	}
	return &pluginpb.Ack{}, nil
}

func (s *hostServer) host(id uint64) (sdk.Host, error) {
	h := s.c.hostOf(id)
	if h == nil {
		return nil, status.Errorf(codes.NotFound, "no call %d in progress", id)
	}
	return h, nil
}

// toStatus maps sdk.ErrUnsupported to Unimplemented for the plugin side.
func toStatus(err error) error {
	if errors.Is(err, sdk.ErrUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return err
}

func (s *hostServer) Send(ctx context.Context, req *pluginpb.SendRequest) (*pluginpb.Ack, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	if len(req.Data) > sdk.MaxMessageSize {
		return nil, status.Errorf(codes.InvalidArgument, "message of %d bytes over the %d limit", len(req.Data), sdk.MaxMessageSize)
	}
	if err := h.Send(ctx, req.To, req.Data); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Ack{}, nil
}

func (s *hostServer) Recv(ctx context.Context, req *pluginpb.RecvRequest) (*pluginpb.Message, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	m, err := h.Recv(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Message{From: m.From, Data: m.Data, Seq: m.Seq}, nil
}

func (s *hostServer) Load(ctx context.Context, req *pluginpb.LoadRequest) (*pluginpb.Global, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	g, err := h.Load(ctx, req.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Global{Version: g.Version, Value: g.Value}, nil
}

func (s *hostServer) Store(ctx context.Context, req *pluginpb.StoreRequest) (*pluginpb.Global, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	if len(req.Value) > sdk.MaxGlobalSize {
		return nil, status.Errorf(codes.InvalidArgument, "value of %d bytes over the %d limit", len(req.Value), sdk.MaxGlobalSize)
	}
	g, err := h.Store(ctx, req.Key, req.Value)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Global{Version: g.Version, Value: g.Value}, nil
}

func (s *hostServer) CompareAndSwap(ctx context.Context, req *pluginpb.CompareAndSwapRequest) (*pluginpb.SwapResult, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	if len(req.Value) > sdk.MaxGlobalSize {
		return nil, status.Errorf(codes.InvalidArgument, "value of %d bytes over the %d limit", len(req.Value), sdk.MaxGlobalSize)
	}
	ok, cur, err := h.CompareAndSwap(ctx, req.Key, req.Version, req.Value)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.SwapResult{Swapped: ok, Current: &pluginpb.Global{Version: cur.Version, Value: cur.Value}}, nil
}

func (s *hostServer) Checkpoint(ctx context.Context, req *pluginpb.CheckpointRequest) (*pluginpb.Ack, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	if len(req.State) > sdk.MaxCheckpointSize {
		return nil, status.Errorf(codes.InvalidArgument, "checkpoint of %d bytes over the %d limit", len(req.State), sdk.MaxCheckpointSize)
	}
	if err := h.Checkpoint(ctx, req.State); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Ack{}, nil
}

func (s *hostServer) Resume(ctx context.Context, req *pluginpb.ResumeRequest) (*pluginpb.ResumeResponse, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	state, ok, err := h.Resume(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.ResumeResponse{Found: ok, State: state}, nil
}

func (s *hostServer) Partial(ctx context.Context, req *pluginpb.PartialRequest) (*pluginpb.Ack, error) {
	if h := s.c.hostOf(req.CallId); h != nil {
		if err := h.Partial(ctx, req.Data); err != nil {
			return nil, err
		}
	}
	return &pluginpb.Ack{}, nil
}
