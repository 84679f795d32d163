package swarmjobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// States of a job (Record.state).
const (
	StateRunning  = "running"
	StateComplete = "complete"
	StateFailed   = "failed"
	StateCanceled = "canceled"
)

// Ended says whether a job in state s is over.
func Ended(s string) bool { return s != StateRunning }

// recordFile is a job folder's record.
const recordFile = "record.json"

// writeRecord writes r into the job folder dir through a temporary file
// and a rename.
func writeRecord(dir string, r *pb.Record) error {
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+recordFile+".tmp-")
	if err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, recordFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}

func readRecord(dir string) (*pb.Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	r := &pb.Record{}
	if err := protojson.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, recordFile), err)
	}
	return r, nil
}

// Newer says whether record a supersedes b, two members' records of one
// job: the higher epoch, then an ended state over a running one, then
// more progress, then the owner's own record.
func Newer(a, b *pb.Record) bool {
	switch {
	case a.Epoch != b.Epoch:
		return a.Epoch > b.Epoch
	case Ended(a.State) != Ended(b.State):
		return Ended(a.State)
	case a.Done+a.Failed != b.Done+b.Failed:
		return a.Done+a.Failed > b.Done+b.Failed
	}
	return false
}

// Rank orders the members for a job: rendezvous hashing of the job ID
// with each member's node ID, so that every member and client computes
// the same order from the same membership. The first that accepts owns
// the job; the next ones hold its copies.
func Rank(jobID string, ms []Member) []Member {
	out := slices.Clone(ms)
	score := func(m Member) string {
		h := sha256.Sum256([]byte(jobID + "\x00" + m.ID))
		return hex.EncodeToString(h[:])
	}
	slices.SortStableFunc(out, func(a, b Member) int { return strings.Compare(score(a), score(b)) })
	return out
}

func clone(r *pb.Record) *pb.Record { return proto.Clone(r).(*pb.Record) }
