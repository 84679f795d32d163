package sdk

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// Plugin is the go-plugin glue for a Task: GRPCServer runs in the plugin
// process, GRPCClient in the host. Task authors never use it directly:
// Serve does.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the task, set in the plugin process only.
	Impl Task
}

var (
	_ plugin.GRPCPlugin   = (*Plugin)(nil)
	_ Task                = (*Client)(nil)
	_ Reducer             = (*Client)(nil)
	_ pluginpb.TaskServer = (*taskServer)(nil)
	_ pluginpb.HostServer = (*hostServer)(nil)
	_ Host                = (*remoteHost)(nil)
)

// GRPCServer registers the task service in the plugin process.
func (p *Plugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterTaskServer(s, &taskServer{impl: p.Impl, broker: broker})
	return nil
}

// GRPCClient returns a *Client in the host, attached to the host callback
// service it serves over the broker.
func (p *Plugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c := &Client{rpc: pluginpb.NewTaskClient(conn), calls: make(map[uint64]Host)}
	id := broker.NextId()
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(maxCallMsg), grpc.MaxSendMsgSize(maxCallMsg))...)
		pluginpb.RegisterHostServer(s, &hostServer{c: c})
		return s
	})
	if _, err := c.rpc.Attach(ctx, &pluginpb.AttachRequest{HostBrokerId: id}); err != nil {
		return nil, fmt.Errorf("attach host callbacks: %w", err)
	}
	return c, nil
}

// maxCallMsg bounds a host callback message: the largest checkpoint plus
// room for the envelope.
const maxCallMsg = MaxCheckpointSize + 1<<20

// ---- plugin side ----

type taskServer struct {
	pluginpb.UnimplementedTaskServer
	impl   Task
	broker *plugin.GRPCBroker

	mu   sync.Mutex
	host pluginpb.HostClient
}

func (s *taskServer) Describe(ctx context.Context, _ *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	resp := &pluginpb.DescribeResponse{SdkProtocol: SDKProtocol}
	if d, ok := s.impl.(Describer); ok {
		info := d.Describe()
		resp.Name, resp.Version, resp.Portable = info.Name, info.Version, info.Portable
	}
	_, resp.Reduce = s.impl.(Reducer)
	_, resp.Verify = s.impl.(Verifier)
	return resp, nil
}

func (s *taskServer) Verify(ctx context.Context, req *pluginpb.VerifyRequest) (resp *pluginpb.VerifyResponse, err error) {
	v, ok := s.impl.(Verifier)
	if !ok {
		return &pluginpb.VerifyResponse{Error: "plugin has no verify step"}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			resp, err = &pluginpb.VerifyResponse{Error: fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}, nil
		}
	}()
	r := &VerifyRequest{JobID: req.JobId, TaskID: req.TaskId, Params: req.Params, Inputs: filesFromPB(req.Inputs), Output: filesFromPB(req.Output)}
	if err := v.Verify(ctx, r); err != nil {
		return &pluginpb.VerifyResponse{Reason: err.Error()}, nil
	}
	return &pluginpb.VerifyResponse{Ok: true}, nil
}

func (s *taskServer) Attach(ctx context.Context, req *pluginpb.AttachRequest) (*pluginpb.AttachResponse, error) {
	conn, err := s.broker.Dial(req.HostBrokerId)
	if err != nil {
		return nil, fmt.Errorf("dial host callbacks: %w", err)
	}
	s.mu.Lock()
	s.host = pluginpb.NewHostClient(conn)
	s.mu.Unlock()
	return &pluginpb.AttachResponse{}, nil
}

func (s *taskServer) hostFor(callID uint64) *remoteHost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &remoteHost{rpc: s.host, callID: callID}
}

func (s *taskServer) Run(ctx context.Context, req *pluginpb.RunRequest) (*pluginpb.RunResponse, error) {
	r := &Request{
		JobID:   req.JobId,
		TaskID:  req.TaskId,
		Attempt: int(req.Attempt),
		Params:  req.Params,
		Inputs:  filesFromPB(req.Inputs),
		WorkDir: req.WorkDir,
	}
	res, err := safeCall(func() (*Result, error) { return s.impl.Run(ctx, r, s.hostFor(req.CallId)) })
	return resultToPB(res, err), nil
}

func (s *taskServer) Reduce(ctx context.Context, req *pluginpb.ReduceRequest) (*pluginpb.RunResponse, error) {
	red, ok := s.impl.(Reducer)
	if !ok {
		return &pluginpb.RunResponse{Error: "plugin has no reduce step"}, nil
	}
	r := &ReduceRequest{JobID: req.JobId, Params: req.Params, WorkDir: req.WorkDir}
	for _, t := range req.Tasks {
		r.Tasks = append(r.Tasks, TaskOutput{TaskID: t.TaskId, Params: t.Params, Files: filesFromPB(t.Files)})
	}
	res, err := safeCall(func() (*Result, error) { return red.Reduce(ctx, r, s.hostFor(req.CallId)) })
	return resultToPB(res, err), nil
}

// safeCall turns a panic in task code into a task error with its stack,
// so one bad input does not take the warm plugin process down.
func safeCall(f func() (*Result, error)) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

func resultToPB(res *Result, err error) *pluginpb.RunResponse {
	if err != nil {
		return &pluginpb.RunResponse{Error: err.Error()}
	}
	if res == nil {
		return &pluginpb.RunResponse{}
	}
	for _, f := range res.Files {
		if !filepath.IsLocal(f) {
			return &pluginpb.RunResponse{Error: fmt.Sprintf("output file %q is not a local path inside the work dir", f)}
		}
	}
	return &pluginpb.RunResponse{Data: res.Data, Files: res.Files}
}

func filesFromPB(in []*pluginpb.File) []File {
	out := make([]File, 0, len(in))
	for _, f := range in {
		out = append(out, File{Name: f.Name, Path: f.Path})
	}
	return out
}

func filesToPB(in []File) []*pluginpb.File {
	out := make([]*pluginpb.File, 0, len(in))
	for _, f := range in {
		out = append(out, &pluginpb.File{Name: f.Name, Path: f.Path})
	}
	return out
}

// remoteHost is the Host a task sees in the plugin process.
type remoteHost struct {
	rpc    pluginpb.HostClient // nil when no host attached
	callID uint64
}

func (h *remoteHost) Progress(ctx context.Context, fraction float64, note string) error {
	if h.rpc == nil {
		return nil
	}
	_, err := h.rpc.Progress(ctx, &pluginpb.ProgressRequest{CallId: h.callID, Fraction: fraction, Note: note})
	return err
}

func (h *remoteHost) Partial(ctx context.Context, data []byte) error {
	if h.rpc == nil {
		return nil
	}
	_, err := h.rpc.Partial(ctx, &pluginpb.PartialRequest{CallId: h.callID, Data: data})
	return err
}

func (h *remoteHost) Send(ctx context.Context, to string, data []byte) error {
	if h.rpc == nil {
		return ErrUnsupported
	}
	if len(data) > MaxMessageSize {
		return fmt.Errorf("send to %s: message of %d bytes over the %d limit", to, len(data), MaxMessageSize)
	}
	_, err := h.rpc.Send(ctx, &pluginpb.SendRequest{CallId: h.callID, To: to, Data: data})
	return fromStatus(err)
}

func (h *remoteHost) Recv(ctx context.Context) (Message, error) {
	if h.rpc == nil {
		return Message{}, ErrUnsupported
	}
	m, err := h.rpc.Recv(ctx, &pluginpb.RecvRequest{CallId: h.callID})
	if err != nil {
		return Message{}, fromStatus(err)
	}
	return Message{From: m.From, Data: m.Data, Seq: m.Seq}, nil
}

func (h *remoteHost) Load(ctx context.Context, key string) (Global, error) {
	if h.rpc == nil {
		return Global{}, ErrUnsupported
	}
	g, err := h.rpc.Load(ctx, &pluginpb.LoadRequest{CallId: h.callID, Key: key})
	if err != nil {
		return Global{}, fromStatus(err)
	}
	return Global{Version: g.Version, Value: g.Value}, nil
}

func (h *remoteHost) Store(ctx context.Context, key string, value []byte) (Global, error) {
	if h.rpc == nil {
		return Global{}, ErrUnsupported
	}
	if len(value) > MaxGlobalSize {
		return Global{}, fmt.Errorf("store %s: value of %d bytes over the %d limit", key, len(value), MaxGlobalSize)
	}
	g, err := h.rpc.Store(ctx, &pluginpb.StoreRequest{CallId: h.callID, Key: key, Value: value})
	if err != nil {
		return Global{}, fromStatus(err)
	}
	return Global{Version: g.Version, Value: g.Value}, nil
}

func (h *remoteHost) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (bool, Global, error) {
	if h.rpc == nil {
		return false, Global{}, ErrUnsupported
	}
	if len(value) > MaxGlobalSize {
		return false, Global{}, fmt.Errorf("compare-and-swap %s: value of %d bytes over the %d limit", key, len(value), MaxGlobalSize)
	}
	r, err := h.rpc.CompareAndSwap(ctx, &pluginpb.CompareAndSwapRequest{CallId: h.callID, Key: key, Version: version, Value: value})
	if err != nil {
		return false, Global{}, fromStatus(err)
	}
	cur := Global{}
	if r.Current != nil {
		cur = Global{Version: r.Current.Version, Value: r.Current.Value}
	}
	return r.Swapped, cur, nil
}

func (h *remoteHost) Checkpoint(ctx context.Context, state []byte) error {
	if h.rpc == nil {
		return ErrUnsupported
	}
	if len(state) > MaxCheckpointSize {
		return fmt.Errorf("checkpoint: %d bytes over the %d limit", len(state), MaxCheckpointSize)
	}
	_, err := h.rpc.Checkpoint(ctx, &pluginpb.CheckpointRequest{CallId: h.callID, State: state}, grpc.MaxCallSendMsgSize(maxCallMsg))
	return fromStatus(err)
}

func (h *remoteHost) Resume(ctx context.Context) ([]byte, bool, error) {
	if h.rpc == nil {
		return nil, false, ErrUnsupported
	}
	r, err := h.rpc.Resume(ctx, &pluginpb.ResumeRequest{CallId: h.callID}, grpc.MaxCallRecvMsgSize(maxCallMsg))
	if err != nil {
		return nil, false, fromStatus(err)
	}
	return r.State, r.Found, nil
}

// fromStatus maps the host's Unimplemented answer back to ErrUnsupported.
func fromStatus(err error) error {
	if err != nil && status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return err
}

// ---- host side ----

// Client is the host's handle on a running plugin process. It implements
// Task and Reducer over gRPC; the Host passed to each call receives that
// call's callbacks. A task's own failure comes back as a *TaskError; any
// other error means the plugin process or its connection failed.
type Client struct {
	rpc  pluginpb.TaskClient
	next atomic.Uint64

	mu    sync.Mutex
	calls map[uint64]Host
}

// Info is what a plugin says of itself.
type PluginInfo struct {
	Info
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
		Info:        Info{Name: r.Name, Version: r.Version, Portable: r.Portable},
		SDKProtocol: r.SdkProtocol,
		Reduce:      r.Reduce,
		Verify:      r.Verify,
	}, nil
}

func (c *Client) register(h Host) (uint64, func()) {
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

func (c *Client) hostOf(id uint64) Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// Run runs one task in the plugin.
func (c *Client) Run(ctx context.Context, req *Request, host Host) (*Result, error) {
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
	return resultFromPB(req.TaskID, resp, err)
}

// Verify asks the plugin to check an output. It returns nil if the plugin
// accepts it, an error wrapping ErrRejected if it rejects it, and any
// other error if the check could not be made.
func (c *Client) Verify(ctx context.Context, req *VerifyRequest) error {
	resp, err := c.rpc.Verify(ctx, &pluginpb.VerifyRequest{
		JobId: req.JobID, TaskId: req.TaskID, Params: req.Params,
		Inputs: filesToPB(req.Inputs), Output: filesToPB(req.Output),
	})
	switch {
	case err != nil:
		return fmt.Errorf("call plugin: %w", err)
	case resp.Error != "":
		return &TaskError{TaskID: req.TaskID, Msg: "verify: " + resp.Error}
	case !resp.Ok:
		return fmt.Errorf("%w: %s", ErrRejected, resp.Reason)
	}
	return nil
}

// Reduce runs the plugin's reduce step.
func (c *Client) Reduce(ctx context.Context, req *ReduceRequest, host Host) (*Result, error) {
	id, done := c.register(host)
	defer done()
	pb := &pluginpb.ReduceRequest{CallId: id, JobId: req.JobID, Params: req.Params, WorkDir: req.WorkDir}
	for _, t := range req.Tasks {
		pb.Tasks = append(pb.Tasks, &pluginpb.TaskOutput{TaskId: t.TaskID, Params: t.Params, Files: filesToPB(t.Files)})
	}
	resp, err := c.rpc.Reduce(ctx, pb)
	return resultFromPB("reduce", resp, err)
}

func resultFromPB(taskID string, resp *pluginpb.RunResponse, err error) (*Result, error) {
	if err != nil {
		return nil, fmt.Errorf("call plugin: %w", err)
	}
	if resp.Error != "" {
		return nil, &TaskError{TaskID: taskID, Msg: resp.Error}
	}
	return &Result{Data: resp.Data, Files: resp.Files}, nil
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

func (s *hostServer) host(id uint64) (Host, error) {
	h := s.c.hostOf(id)
	if h == nil {
		return nil, status.Errorf(codes.NotFound, "no call %d in progress", id)
	}
	return h, nil
}

// toStatus maps ErrUnsupported to Unimplemented for the plugin side.
func toStatus(err error) error {
	if errors.Is(err, ErrUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return err
}

func (s *hostServer) Send(ctx context.Context, req *pluginpb.SendRequest) (*pluginpb.Ack, error) {
	h, err := s.host(req.CallId)
	if err != nil {
		return nil, err
	}
	if len(req.Data) > MaxMessageSize {
		return nil, status.Errorf(codes.InvalidArgument, "message of %d bytes over the %d limit", len(req.Data), MaxMessageSize)
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
	if len(req.Value) > MaxGlobalSize {
		return nil, status.Errorf(codes.InvalidArgument, "value of %d bytes over the %d limit", len(req.Value), MaxGlobalSize)
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
	if len(req.Value) > MaxGlobalSize {
		return nil, status.Errorf(codes.InvalidArgument, "value of %d bytes over the %d limit", len(req.Value), MaxGlobalSize)
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
	if len(req.State) > MaxCheckpointSize {
		return nil, status.Errorf(codes.InvalidArgument, "checkpoint of %d bytes over the %d limit", len(req.State), MaxCheckpointSize)
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
