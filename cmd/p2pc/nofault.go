//go:build !p2pcfault

package main

import (
	"log/slog"

	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/transfer"
)

// joinFaults has no flags without the p2pcfault tag.
type joinFaults struct{}

func (joinFaults) lie() node.Lie { return node.Lie{} }

func (joinFaults) announce(*slog.Logger) {}

// serveFaults has no flags without the p2pcfault tag.
type serveFaults struct{}

func (serveFaults) apply(*transfer.ServerOptions, *slog.Logger) {}
