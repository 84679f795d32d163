package swarmjobs

import (
	"sync"

	"google.golang.org/protobuf/proto"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// Sent is what this member sent to other members as copies of one job
// (Hold streams), by kind (KindJob, KindState, KindResults, KindRecord):
// the bytes of the messages (their protobuf size, without gRPC, HTTP/2
// and TLS framing) and how many Hold streams carried them.
type Sent struct {
	Bytes map[string]int64
	Holds map[string]int
}

// sentCounter counts the copies sent per job (Service.copies).
type sentCounter struct {
	mu   sync.Mutex
	jobs map[string]*Sent
}

// counting returns send, counting each message it sends as a copy of
// kind of job id; it counts one Hold stream.
func (c *sentCounter) counting(id, kind string, send func(*pb.Bundle) error) func(*pb.Bundle) error {
	c.add(id, kind, 0, 1)
	return func(m *pb.Bundle) error {
		err := send(m)
		if err == nil {
			c.add(id, kind, int64(proto.Size(m)), 0)
		}
		return err
	}
}

func (c *sentCounter) add(id, kind string, n int64, holds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[string]*Sent{}
	}
	s := c.jobs[id]
	if s == nil {
		s = &Sent{Bytes: map[string]int64{}, Holds: map[string]int{}}
		c.jobs[id] = s
	}
	s.Bytes[kind] += n
	s.Holds[kind] += holds
}

// take returns what was counted for job id and forgets it.
func (c *sentCounter) take(id string) Sent {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.jobs[id]
	delete(c.jobs, id)
	if s == nil {
		return Sent{Bytes: map[string]int64{}, Holds: map[string]int{}}
	}
	return *s
}

// logSent logs what this member sent as copies of the job of r while it
// owned it (one line, "copies sent", at info; p2pc bench --suite
// takeover reads it) and forgets the count.
func (s *Service) logSent(r *pb.Record) {
	c := s.copies.take(r.Id)
	var total int64
	for _, n := range c.Bytes {
		total += n
	}
	s.log.Info("copies sent", "job", shortJob(r.Id), "epoch", r.Epoch, "tasks", r.Total, "bytes", total,
		"state_bytes", c.Bytes[KindState], "state_holds", c.Holds[KindState],
		"results_bytes", c.Bytes[KindResults], "job_bytes", c.Bytes[KindJob], "record_bytes", c.Bytes[KindRecord])
}
