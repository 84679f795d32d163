package sdk

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// taskPlugin is the plugin process's side of go-plugin's glue: it serves
// the Task service for Serve. The host's side is p2pc's own
// (internal/pluginproto); a plugin never dials anything.
type taskPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Task
}

var (
	_ plugin.GRPCPlugin   = (*taskPlugin)(nil)
	_ pluginpb.TaskServer = (*taskServer)(nil)
	_ Host                = (*remoteHost)(nil)
)

// GRPCServer registers the task service in the plugin process.
func (p *taskPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterTaskServer(s, &taskServer{impl: p.impl, broker: broker})
	return nil
}

// GRPCClient is the host's business: a plugin process never calls it.
func (p *taskPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("sdk: the task plugin's client side is the p2pc host's")
}

// maxCallMsg bounds a host callback message: the largest checkpoint plus
// room for the envelope.
const maxCallMsg = MaxCheckpointSize + 1<<20

// The host's bound is the same (this fails to compile if they differ).
var _ = [1]struct{}{}[maxCallMsg-pluginpb.MaxCallMsg]

type taskServer struct {
	pluginpb.UnimplementedTaskServer
	impl   Task
	broker *plugin.GRPCBroker

	mu   sync.Mutex
	host pluginpb.HostClient
}

func (s *taskServer) Describe(ctx context.Context, _ *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	resp := &pluginpb.DescribeResponse{SdkProtocol: pluginpb.SDKProtocol}
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
	if suspended(r.Output) {
		// A suspension is no answer to check: the parent's own result,
		// once its children are done, is checked like any.
		return &pluginpb.VerifyResponse{Ok: true}, nil
	}
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
	start := time.Now()
	res, err := runTask(ctx, s.impl, r, s.hostFor(req.CallId))
	out := resultToPB(res, err)
	out.StartedUnixNano, out.EndedUnixNano = start.UnixNano(), time.Now().UnixNano()
	return out, nil
}

// RunBatch runs the request's tasks one after another, each with its own
// ctx (its timeout_ms), panic recovery and call_id, and streams each
// result as soon as its task ends. A task that returned files or left its
// work dir not empty ends the stream if a later task names the same
// folder: the host collects the files and sends the rest again.
//
// With max_results > 1 it sends up to that many results in one message,
// holding each at most hold_us (results.go).
func (s *taskServer) RunBatch(req *pluginpb.RunBatchRequest, stream grpc.ServerStreamingServer[pluginpb.RunBatchResult]) error {
	out := newResultSender(stream, req.MaxResults, req.HoldUs)
	defer out.close()
	for i, t := range req.Tasks {
		if err := stream.Context().Err(); err != nil {
			return err
		}
		res := s.runOne(stream.Context(), t)
		res.Index = uint32(i)
		if err := out.send(res, i == len(req.Tasks)-1); err != nil {
			return err
		}
		if !res.Clean && sharesWorkDir(req.Tasks[i+1:], t.WorkDir) {
			return out.close()
		}
	}
	return out.close()
}

// runOne runs one task of a batch.
func (s *taskServer) runOne(ctx context.Context, t *pluginpb.RunRequest) *pluginpb.RunBatchResult {
	if t.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	r := &Request{
		JobID:   t.JobId,
		TaskID:  t.TaskId,
		Attempt: int(t.Attempt),
		Params:  t.Params,
		Inputs:  filesFromPB(t.Inputs),
		WorkDir: t.WorkDir,
	}
	start := time.Now()
	res, err := runTask(ctx, s.impl, r, s.hostFor(t.CallId))
	out := &pluginpb.RunBatchResult{
		Response:        resultToPB(res, err),
		StartedUnixNano: start.UnixNano(),
		EndedUnixNano:   time.Now().UnixNano(),
		TimedOut:        errors.Is(ctx.Err(), context.DeadlineExceeded),
	}
	out.Clean = len(out.Response.Files) == 0 && emptyDir(t.WorkDir)
	return out
}

func sharesWorkDir(rest []*pluginpb.RunRequest, dir string) bool {
	for _, t := range rest {
		if t.WorkDir == dir {
			return true
		}
	}
	return false
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
