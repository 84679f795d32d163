package discovery

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/mdns"
	"github.com/hashicorp/memberlist"
)

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Initiating push/pull sync with: b 127.0.0.1:1", slog.LevelDebug, "Initiating push/pull sync with: b 127.0.0.1:1"},
		{"[INFO] memberlist: Suspect b has failed, no acks received", slog.LevelInfo, "Suspect b has failed, no acks received"},
		{"[WARN] memberlist: Refuting a suspect message (from: a)", slog.LevelWarn, "Refuting a suspect message (from: a)"},
		{"[ERR] memberlist: Conflicting address for a.", slog.LevelError, "Conflicting address for a."},
		{"[ERROR] memberlist: Failed to compress payload: x", slog.LevelError, "Failed to compress payload: x"},
		{"[ERR] mdns: Failed to unpack packet: x", slog.LevelError, "Failed to unpack packet: x"},
		{"Err: Could not set the deadline: x", slog.LevelError, "Could not set the deadline: x"},
		{"no responses for query with questions: a", slog.LevelInfo, "no responses for query with questions: a"},
	}
	for _, tt := range tests {
		level, msg := parseLogLine(tt.in)
		if level != tt.level || msg != tt.msg {
			t.Errorf("parseLogLine(%q) = %v, %q; want %v, %q", tt.in, level, msg, tt.level, tt.msg)
		}
	}
}

func TestStdLoggerToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "memberlist")
	var hooked []string
	std := stdLogger(l, func(_ slog.Level, msg string) bool {
		hooked = append(hooked, msg)
		return msg != "dropped"
	})
	std.Printf("[WARN] memberlist: Got ping for unexpected node %s", "x")
	std.Printf("[DEBUG] memberlist: two\n[INFO] memberlist: lines")
	std.Printf("[ERR] memberlist: dropped")
	out := buf.String()
	if strings.Contains(out, "dropped") {
		t.Errorf("line the hook dropped was logged:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="Got ping for unexpected node x" component=memberlist`,
		`level=DEBUG msg=two component=memberlist`,
		`level=INFO msg=lines component=memberlist`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if len(hooked) != 4 {
		t.Errorf("hook saw %q", hooked)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	in := Meta{Name: "n1", GRPCAddr: "10.0.0.1:7000", OS: "linux", Arch: "amd64", Version: "v0.1.0", Proto: 3, Slots: 8, FreeSlots: 5,
		Sandbox: "files=landlock-v7 network=netns syscalls=seccomp user=p2pc-task(998)", GPUs: "8 × NVIDIA H200"}
	b, err := encodeMeta(in, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("encoded meta: %d bytes: %s", len(b), b)
	out, leaving, err := decodeMeta("n1", b)
	if err != nil || leaving || out != in {
		t.Fatalf("decode = %+v, %v, %v; want %+v", out, leaving, err, in)
	}
	b, _ = encodeMeta(in, true)
	if _, leaving, _ := decodeMeta("n1", b); !leaving {
		t.Error("leaving mark lost")
	}
	if _, _, err := decodeMeta("x", []byte("garbage")); err == nil {
		t.Error("garbage decoded")
	}
	big := in
	big.Version = strings.Repeat("v", memberlist.MetaMaxSize)
	if _, err := encodeMeta(big, false); err == nil || !strings.Contains(err.Error(), "limit of 512") {
		t.Errorf("oversized meta: err = %v", err)
	}
}

// TestMetaAddressScheme: a tcp address travels bare under "g", as every
// version reads it; an address of another transport travels with its
// scheme under "u", which older versions ignore (they skip a member
// without an address rather than dial it as tcp); a bare "g" of an older
// version is read as tcp.
func TestMetaAddressScheme(t *testing.T) {
	for _, tc := range []struct{ addr, wantG, wantU, back string }{
		{"10.0.0.1:7000", "10.0.0.1:7000", "", "10.0.0.1:7000"},
		{"tcp://10.0.0.1:7000", "10.0.0.1:7000", "", "10.0.0.1:7000"},
		{"mem://a", "", "mem://a", "mem://a"},
		{"quic://[::1]:7000", "", "quic://[::1]:7000", "quic://[::1]:7000"},
	} {
		b, err := encodeMeta(Meta{Name: "n", GRPCAddr: tc.addr, Proto: 3}, false)
		if err != nil {
			t.Fatal(err)
		}
		var w struct {
			G string `json:"g"`
			U string `json:"u"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		if w.G != tc.wantG || w.U != tc.wantU {
			t.Errorf("%s encoded as %s: want g=%q u=%q", tc.addr, b, tc.wantG, tc.wantU)
		}
		if m, _, err := decodeMeta("n", b); err != nil || m.GRPCAddr != tc.back {
			t.Errorf("%s decoded as %q, %v; want %q", tc.addr, m.GRPCAddr, err, tc.back)
		}
	}
	// Metadata of a version before the transport seam.
	if m, _, err := decodeMeta("old", []byte(`{"g":"10.0.0.1:7000","p":3,"s":2}`)); err != nil || m.GRPCAddr != "10.0.0.1:7000" {
		t.Errorf("old metadata decoded as %q, %v", m.GRPCAddr, err)
	}
}

func TestInstanceLabel(t *testing.T) {
	if got := instanceLabel("node-1_a"); got != "node-1_a" {
		t.Errorf("clean name changed: %q", got)
	}
	a, b := instanceLabel("a.b"), instanceLabel("a-b")
	if a == b || !strings.HasPrefix(a, "a-b-") {
		t.Errorf("instanceLabel(a.b) = %q, instanceLabel(a-b) = %q", a, b)
	}
	if l := instanceLabel(strings.Repeat("x", 100)); len(l) > 63 {
		t.Errorf("label too long: %d", len(l))
	}
}

func TestPeerFromEntry(t *testing.T) {
	ip := net.IPv4(192, 0, 2, 7)
	tests := []struct {
		name    string
		e       mdns.ServiceEntry
		want    Peer
		wantErr string
	}{
		{
			name: "full TXT",
			e:    mdns.ServiceEntry{Name: "n1._p2pc._tcp.local.", AddrV4: ip, Port: 7000, InfoFields: []string{"name=n.1", "grpc=10.0.0.1:7000", "gossip=10.0.0.1:7946", "v=2"}},
			want: Peer{Name: "n.1", Addr: "10.0.0.1:7000", GossipAddr: "10.0.0.1:7946", Version: 2},
		},
		{
			name: "unspecified hosts take the A record",
			e:    mdns.ServiceEntry{Name: "n1._p2pc._tcp.local.", AddrV4: ip, Port: 7000, InfoFields: []string{"name=n1", "grpc=0.0.0.0:7000", "gossip=:7946"}},
			want: Peer{Name: "n1", Addr: "192.0.2.7:7000", GossipAddr: "192.0.2.7:7946"},
		},
		{
			name: "no TXT: instance name, A and SRV",
			e:    mdns.ServiceEntry{Name: "n2._p2pc._tcp.local.", AddrV4: ip, Port: 7000},
			want: Peer{Name: "n2", Addr: "192.0.2.7:7000"},
		},
		{
			name:    "bad version",
			e:       mdns.ServiceEntry{Name: "n1._p2pc._tcp.local.", AddrV4: ip, Port: 7000, InfoFields: []string{"name=n1", "v=x"}},
			wantErr: "version",
		},
		{
			name:    "bad grpc",
			e:       mdns.ServiceEntry{Name: "n1._p2pc._tcp.local.", AddrV4: ip, Port: 7000, InfoFields: []string{"grpc=nope"}},
			wantErr: "grpc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := peerFromEntry(&tt.e)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestAnnouncementRecords(t *testing.T) {
	m := &MDNS{cfg: MDNSConfig{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}}
	svc, err := m.service(Announcement{Name: "n1", GRPCAddr: "0.0.0.0:7000", GossipAddr: "127.0.0.1:7946", Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(svc.TXT, " "); got != "name=n1 grpc=127.0.0.1:7000 gossip=127.0.0.1:7946 v=3" {
		t.Errorf("TXT = %q", got)
	}
	if svc.Port != 7000 || svc.HostName != "n1.p2pc.local." || svc.Service != MDNSService {
		t.Errorf("service = %+v", svc)
	}
	for _, bad := range []Announcement{{GRPCAddr: "127.0.0.1:1"}, {Name: "x", GRPCAddr: "nope"}, {Name: "x", GRPCAddr: "127.0.0.1:0"}} {
		if _, err := m.service(bad); err == nil {
			t.Errorf("service(%+v) accepted", bad)
		}
	}
}

func TestEventsDropOldest(t *testing.T) {
	m := &Membership{events: make(chan Event, 2), log: orDiscard(nil)}
	for i := range 3 {
		m.emit(Event{Kind: Join, Member: Member{Meta: Meta{Name: string(rune('a' + i))}}})
	}
	if a, b := <-m.events, <-m.events; a.Member.Name != "b" || b.Member.Name != "c" || m.dropped != 1 {
		t.Errorf("kept %s and %s, dropped %d; want b, c, 1", a.Member.Name, b.Member.Name, m.dropped)
	}
	m.closed = true
	m.emit(Event{}) // after Close: ignored, no panic
}

// TestRejoinTable: a member that died is joined again after 1, 2, 4, 4 s
// ...; one that comes back or leaves is not; one silent for
// rejoinGiveUp is forgotten.
func TestRejoinTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var tb rejoinTable
	tb.seen("a", "10.0.0.1:7946")
	tb.seen("b", "10.0.0.2:7946")
	tb.seen("c", "10.0.0.3:7946")
	tb.dead("a", t0)
	tb.dead("b", t0)
	tb.left("c")
	steps := []struct {
		at     time.Duration
		tried  bool // the due ones were tried without success
		want   string
		gaveUp string
	}{
		{at: 0, want: ""},
		{at: 999 * time.Millisecond, want: ""},
		{at: time.Second, tried: true, want: "a,b"},     // next after 1 s
		{at: 1500 * time.Millisecond, want: ""},         // not before 2 s
		{at: 2 * time.Second, tried: true, want: "a,b"}, // next after 2 s
		{at: 3 * time.Second, want: ""},                 //
		{at: 4 * time.Second, tried: true, want: "a,b"}, // next after 4 s (the cap)
		{at: 8 * time.Second, tried: true, want: "a,b"}, // capped at 4 s
		{at: 12 * time.Second, want: "a,b"},             // not tried: due still
		{at: rejoinGiveUp, want: "", gaveUp: "a,b"},     // forgotten
		{at: rejoinGiveUp + time.Minute, want: ""},      //
	}
	for _, s := range steps {
		todo, gaveUp := tb.due(at(s.at))
		var names []string
		for n := range todo {
			names = append(names, n)
		}
		slices.Sort(names)
		slices.Sort(gaveUp)
		if got := strings.Join(names, ","); got != s.want {
			t.Errorf("at %s: due %q, want %q", s.at, got, s.want)
		}
		if got := strings.Join(gaveUp, ","); got != s.gaveUp {
			t.Errorf("at %s: gave up %q, want %q", s.at, got, s.gaveUp)
		}
		if s.tried {
			for n := range todo {
				tb.tried(n, at(s.at))
			}
		}
	}
	// Back alive: not due any more; dead again: from 1 s.
	tb.seen("a", "10.0.0.1:7000")
	tb.dead("a", at(time.Hour))
	tb.dead("a", at(time.Hour+time.Second)) // a second Dead changes nothing
	if todo, _ := tb.due(at(time.Hour + time.Second)); todo["a"] != "10.0.0.1:7000" {
		t.Errorf("dead again: due %v, want a at its new address", todo)
	}
}

func TestUndecryptable(t *testing.T) {
	for _, tc := range []struct {
		msg, src string
		ok       bool
	}{
		{"failed to receive: no installed keys could decrypt the message from=10.0.0.7:55346", "10.0.0.7", true},
		{"Decrypt packet failed: no installed keys could decrypt the message from=[fe80::1]:7946", "fe80::1", true},
		{"Decrypt packet failed: bad", "unknown", true},
		{"failed to receive: EOF from=10.0.0.7:1", "", false},
		{"Suspect a has failed, no acks received", "", false},
	} {
		src, ok := undecryptable(tc.msg)
		if src != tc.src || ok != tc.ok {
			t.Errorf("undecryptable(%q) = %q, %v; want %q, %v", tc.msg, src, ok, tc.src, tc.ok)
		}
	}
}
