// Package transferpb holds the generated protobuf and gRPC code of the
// p2pc.blocks.v1 block transfer protocol (blocks.proto). Do not edit the
// .pb.go files; regenerate them with go generate (or `just proto`).
package transferpb

// The proto is compiled from the repository root, so that it registers as
// internal/transfer/transferpb/blocks.proto (a name no other package uses):
//
//go:generate sh -c "cd ../../.. && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative internal/transfer/transferpb/blocks.proto"
