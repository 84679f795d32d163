package plain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestError(t *testing.T) {
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"not gRPC", errors.New("disk full"), "disk full"},
		{"refused, wrapped", fmt.Errorf("peer 127.0.0.1:1: %w", refused), "peer 127.0.0.1:1: nothing listens there (connection refused)"},
		{"no such host", status.Error(codes.Unavailable, `name resolver error: produced zero addresses; lookup nosuchhost.invalid: no such host`), "the name does not resolve"},
		{"RST_STREAM", fmt.Errorf("receive from pa: %w", status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: CANCEL")), "receive from pa: the other side dropped the call"},
		{"reset", status.Error(codes.Unavailable, "error reading from server: read tcp: connection reset by peer"), "the connection broke (reset by the other side)"},
		{"TLS handshake keeps why", status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: peer certificate is not from this swarm (another swarm's secret, or none)"`),
			"the TLS handshake failed: peer certificate is not from this swarm (another swarm's secret, or none)"},
		{"canceled", status.Error(codes.Canceled, "context canceled"), "canceled"},
		{"other codes keep their message", status.Error(codes.InvalidArgument, "bad lease"), "bad lease"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Error(c.err)
			if c.err == nil {
				if got != nil {
					t.Fatalf("Error(nil) = %v", got)
				}
				return
			}
			if got.Error() != c.want {
				t.Errorf("Error = %q, want %q", got, c.want)
			}
			if strings.Contains(got.Error(), "rpc error") || !errors.Is(got, c.err) {
				t.Errorf("%q: gRPC words left, or the original is not wrapped", got)
			}
		})
	}
	if err := Error(fmt.Errorf("x: %w", context.Canceled)); !errors.Is(err, context.Canceled) {
		t.Errorf("lost the context error: %v", err)
	}
}
