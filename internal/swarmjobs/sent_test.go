package swarmjobs

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

func TestSentCounter(t *testing.T) {
	var c sentCounter
	msgs := append([]*pb.Bundle{{Msg: &pb.Bundle_Header{Header: &pb.Header{Kind: KindState, Record: &pb.Record{Id: "j1"}}}}},
		fileMsgs("tasks/a", []byte("hello"), make([]byte, 32))...)
	var want int64
	for _, m := range msgs {
		want += int64(proto.Size(m))
	}
	ok := func(*pb.Bundle) error { return nil }
	for range 2 { // two holders
		send := c.counting("j1", KindState, ok)
		for _, m := range msgs {
			if err := send(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	failed := c.counting("j1", KindResults, func(*pb.Bundle) error { return errors.New("gone") })
	if failed(msgs[1]) == nil {
		t.Fatal("the failing send did not fail")
	}
	c.counting("j2", KindJob, ok)(msgs[0])
	got := c.take("j1")
	if got.Bytes[KindState] != 2*want || got.Holds[KindState] != 2 || got.Bytes[KindResults] != 0 || got.Holds[KindResults] != 1 {
		t.Errorf("j1: %+v, want %d state bytes in 2 holds, 0 results bytes in 1", got, 2*want)
	}
	if again := c.take("j1"); len(again.Bytes) != 0 {
		t.Errorf("j1 counted after take: %+v", again)
	}
	if j2 := c.take("j2"); j2.Bytes[KindJob] != int64(proto.Size(msgs[0])) {
		t.Errorf("j2: %+v", j2)
	}
}
