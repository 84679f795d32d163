package swarmjobs

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/internal/trust"
)

func testService(t *testing.T, cfg Config) *Service {
	t.Helper()
	cfg.Dir = t.TempDir()
	if cfg.Name == "" {
		cfg.Name = "me"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReserveDiskCap: copies are taken while they fit under --disk,
// counting those being received; one that does not fit is refused with
// ResourceExhausted and a message that names the cap, and nothing is
// dropped for it.
func TestReserveDiskCap(t *testing.T) {
	s := testService(t, Config{Disk: 1000})
	id := strings.Repeat("a", 64)
	s.keep.sizes["kept"] = 300
	rel1, err := s.reserve(id, 500)
	if err != nil {
		t.Fatalf("first copy (800 of 1000): %v", err)
	}
	_, err = s.reserve(id, 201)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "member me is at its disk cap") || !strings.Contains(err.Error(), "p2pc join --disk") {
		t.Fatalf("a copy past the cap: %v", err)
	}
	if s.keep.sizes["kept"] != 300 {
		t.Errorf("a refused copy changed what is kept: %v", s.keep.sizes)
	}
	rel1()
	if _, err := s.reserve(id, 700); err != nil {
		t.Errorf("after the first copy's reservation ended: %v", err)
	}
	if _, err := testService(t, Config{}).reserve(id, 1<<40); err != nil {
		t.Errorf("no cap: %v", err)
	}
}

// TestHoldersLiveAndLost: the holders of an output are this member and
// the live ones (in rank order), those not seen for LostAfter are gone,
// the others pending.
func TestHoldersLiveAndLost(t *testing.T) {
	me := trust.NodeID{1}
	s := testService(t, Config{ID: me, LostAfter: time.Minute})
	now := time.Now()
	s.keep.since = now.Add(-time.Hour)
	s.keep.seen["b"] = now.Add(-30 * time.Second)
	s.keep.seen["c"] = now.Add(-2 * time.Minute)
	id := strings.Repeat("f", 64)
	r := &pb.Record{Id: id, State: StateComplete, ResultsOn: []string{"a", "b", "c", "d"}, Results: true}
	present, pending, gone := s.holders(r, map[string]Member{"a": {ID: "a"}}, now)
	if want := rankIDs(id, []string{"a", me.String()}); !slices.Equal(present, want) {
		t.Errorf("present %v, want %v", present, want)
	}
	if !slices.Equal(pending, []string{"b"}) || !slices.Equal(gone, []string{"c", "d"}) {
		t.Errorf("pending %v, gone %v; want [b], [c d]", pending, gone)
	}
	// A member that no longer holds the output is not among them, even
	// where the record still lists it.
	r.Results, r.ResultsOn = false, []string{"a", me.String()}
	if present, _, _ := s.holders(r, map[string]Member{"a": {ID: "a"}}, now); !slices.Equal(present, []string{"a"}) {
		t.Errorf("present %v, want [a]", present)
	}
}

// TestMaySend: the owner sends any copy; a member holding an ended job's
// output sends copies of it and records, if the receiver's record agrees
// on owner and submitter and lists it; nobody else.
func TestMaySend(t *testing.T) {
	s := testService(t, Config{})
	id := strings.Repeat("b", 64)
	ended := &pb.Record{Id: id, State: StateComplete, OwnerId: "own", Submitter: "sub", ResultsOn: []string{"own", "h1", "h2"}}
	tests := []struct {
		name, from, kind string
		rec              *pb.Record
		want             bool
	}{
		{"owner, bundle", "own", KindJob, &pb.Record{Id: id, State: StateRunning, OwnerId: "own"}, true},
		{"holder, new output copy", "h1", KindResults, ended, true},
		{"holder, bundle", "h1", KindJob, ended, false},
		{"holder, record of a job unknown here", "h1", KindRecord, ended, false},
		{"not listed", "x", KindResults, ended, false},
		{"running job", "h1", KindResults, &pb.Record{Id: id, State: StateRunning, OwnerId: "own", ResultsOn: []string{"h1"}}, false},
	}
	for _, tc := range tests {
		if got := s.maySend(tc.from, tc.kind, tc.rec); got != tc.want {
			t.Errorf("%s: maySend = %v, want %v", tc.name, got, tc.want)
		}
	}
	s.jobs[id] = &entry{rec: clone(ended)}
	if !s.maySend("h2", KindRecord, ended) {
		t.Errorf("a listed holder's record is refused")
	}
	other := clone(ended)
	other.Submitter = "someone else"
	if s.maySend("h2", KindRecord, other) {
		t.Errorf("a record that changes the submitter is taken")
	}
	newcomer := clone(ended)
	newcomer.ResultsOn = append(newcomer.ResultsOn, "h3")
	if s.maySend("h3", KindResults, newcomer) {
		t.Errorf("a member this one's record does not list sends a copy")
	}
}

// TestMergeFetchedSticks: a record that does not say fetched does not
// undo it.
func TestMergeFetchedSticks(t *testing.T) {
	e := &entry{rec: &pb.Record{Epoch: 1, State: StateComplete, Fetched: true}}
	merge(e, &pb.Record{Epoch: 1, State: StateComplete, ResultsOn: []string{"a"}})
	if !e.rec.Fetched || !slices.Equal(e.rec.ResultsOn, []string{"a"}) {
		t.Errorf("after merge: %+v", e.rec)
	}
}

// TestPlanKeep: the keeper (first present holder) makes the copies
// missing until the fetch, pending holders count, gone ones are pruned;
// after the fetch every other member drops its copy and nobody copies.
func TestPlanKeep(t *testing.T) {
	tests := []struct {
		name                   string
		fetched                bool
		present, pending, gone []string
		want                   keepPlan
	}{
		{"keeper, all there", false, []string{"me", "a", "b"}, nil, nil, keepPlan{Keeper: "me"}},
		{"keeper, one gone", false, []string{"me", "a"}, nil, []string{"b"}, keepPlan{Keeper: "me", Copy: 1, Prune: true}},
		{"keeper, one silent but not gone yet", false, []string{"me", "a"}, []string{"b"}, nil, keepPlan{Keeper: "me"}},
		{"keeper alone", false, []string{"me"}, nil, []string{"a", "b"}, keepPlan{Keeper: "me", Copy: 2, Prune: true}},
		{"not the keeper", false, []string{"a", "me"}, nil, []string{"b"}, keepPlan{Keeper: "a"}},
		{"fetched, not the keeper", true, []string{"a", "me"}, nil, nil, keepPlan{Keeper: "a", Drop: true}},
		{"fetched, the keeper", true, []string{"me", "a"}, nil, []string{"b"}, keepPlan{Keeper: "me"}},
		{"fetched, holding only the bundle", true, []string{"a"}, nil, nil, keepPlan{Keeper: "a", Drop: true}},
		{"no holder live", false, nil, []string{"a"}, nil, keepPlan{}},
	}
	for _, tc := range tests {
		if got := planKeep("me", tc.fetched, tc.present, tc.pending, tc.gone, 3); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// asNode is a context of a gRPC call from a fresh node identity, and
// that node's ID.
func asNode(t *testing.T) (context.Context, trust.NodeID) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{{PublicKey: pub}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: state}}), trust.IDOf(pub)
}

// TestFetchedBySubmitterOnly: only the submitter's node says it fetched
// an ended job; the mark is saved with the record.
func TestFetchedBySubmitterOnly(t *testing.T) {
	s := testService(t, Config{})
	subCtx, sub := asNode(t)
	otherCtx, _ := asNode(t)
	id := strings.Repeat("c", 64)
	dir := s.jobDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.jobs[id] = &entry{rec: &pb.Record{Id: id, State: StateRunning, Submitter: sub.String()}, dir: dir, changed: make(chan struct{})}
	if _, err := s.Fetched(subCtx, &pb.JobRef{Id: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("fetched while running: %v", err)
	}
	s.jobs[id].rec.State = StateComplete
	if _, err := s.Fetched(otherCtx, &pb.JobRef{Id: id}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "only the submitter") {
		t.Errorf("fetched said by another node: %v", err)
	}
	if s.jobs[id].rec.Fetched {
		t.Fatalf("another node marked the job fetched")
	}
	r, err := s.Fetched(subCtx, &pb.JobRef{Id: id})
	if err != nil || !r.Fetched {
		t.Fatalf("fetched said by the submitter: %v, %v", r, err)
	}
	if saved, err := readRecord(dir); err != nil || !saved.Fetched {
		t.Errorf("saved record: %v, %v", saved, err)
	}
}
