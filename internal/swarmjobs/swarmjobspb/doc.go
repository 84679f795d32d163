// Package swarmjobspb is the generated code of jobs.proto: the Jobs
// service through which a job handed to the swarm is placed on its owner,
// copied to holders, listed, watched, fetched and canceled. Package
// swarmjobs serves and calls it; docs/protocol.md explains it.
package swarmjobspb
