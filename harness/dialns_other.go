//go:build !linux

package harness

import (
	"context"
	"errors"
	"net"
)

func dialInNetns(context.Context, string, string, int) ([]net.Conn, error) {
	return nil, errors.New("network namespaces need Linux")
}
