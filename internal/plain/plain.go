package plain

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error returns err with its gRPC status text replaced by plain words;
// errors.Is and errors.As see through it to err. Nil stays nil, and an
// error without a gRPC status is returned as it is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return err
	}
	st := gs.GRPCStatus()
	raw := st.Err().Error()
	msg := err.Error()
	if !strings.Contains(msg, raw) {
		return err
	}
	return &plainError{msg: strings.Replace(msg, raw, Words(st.Code(), st.Message()), 1), err: err}
}

type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// causes are what a gRPC error's message may say happened below it, and
// how to say it; the first that matches wins.
var causes = []struct{ match, say string }{
	{"connection refused", "nothing listens there (connection refused)"},
	{"no such host", "the name does not resolve"},
	{"server misbehaving", "the name does not resolve (DNS server failure)"},
	{"network is unreachable", "the network is unreachable"},
	{"no route to host", "no route to the host"},
	{"i/o timeout", "no answer (timed out)"},
	{"connection reset", "the connection broke (reset by the other side)"},
	{"broken pipe", "the connection broke"},
	{"RST_STREAM", "the other side dropped the call"},
	{"error reading from server", "the connection broke"},
	{"EOF", "the connection broke"},
	{"transport is closing", "the connection was closed"},
	{"client connection is closing", "the connection was closed"},
}

// handshake is how gRPC reports a failed TLS handshake; what follows is
// why (trust.ErrNotMember's text, for one).
const handshake = "authentication handshake failed"

// Words says what a gRPC status means, in plain words.
func Words(code codes.Code, msg string) string {
	if i := strings.Index(msg, handshake); i >= 0 {
		why := strings.TrimSpace(strings.TrimLeft(msg[i+len(handshake):], ": "))
		if j := strings.IndexByte(why, '"'); j >= 0 {
			why = why[:j]
		}
		if why == "" {
			return "the TLS handshake failed"
		}
		return "the TLS handshake failed: " + why
	}
	for _, c := range causes {
		if strings.Contains(msg, c.match) {
			return c.say
		}
	}
	switch code {
	case codes.Canceled:
		return "canceled"
	case codes.DeadlineExceeded:
		return "no answer in time"
	case codes.Unavailable:
		return "unreachable"
	case codes.Unimplemented:
		return "the other side does not know this call (another p2pc version?)"
	case codes.PermissionDenied, codes.Unauthenticated:
		return "refused: " + msg
	}
	return msg
}
