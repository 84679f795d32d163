package node

import "google.golang.org/grpc"

// Services returns the node's gRPC server as a registrar, for services
// served beside the Peer and Blocks protocols on the same listener and
// mutual TLS (package swarmjobs). Register before Serve.
func (n *Node) Services() grpc.ServiceRegistrar { return n.grpc }
