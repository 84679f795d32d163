package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/mattn/go-isatty"
	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/spec"
)

// BlocksCmd groups the commands on the local content-addressed store and
// block transfer between peers.
type BlocksCmd struct {
	Put    BlocksPutCmd    `cmd:"" help:"Cut a file into blocks in the local store and print its file ID."`
	Get    BlocksGetCmd    `cmd:"" help:"Fetch a file by ID from peers into the local store and write it out."`
	Ls     BlocksLsCmd     `cmd:"" help:"List the files held in the local store and its size."`
	Verify BlocksVerifyCmd `cmd:"" help:"Re-hash every block (or one file's), quarantining corrupt ones."`
	Gc     BlocksGcCmd     `cmd:"" help:"Remove unpinned blocks, least recently used first, down to a size."`
	Serve  BlocksServeCmd  `cmd:"" help:"Serve the local store to peers over gRPC until interrupted."`
}

// filePin names the pin that keeps a put or fetched file in the store.
func filePin(id blocks.ID) string { return "file-" + id.String() }

// openStore opens the node's block store: <data>/store.
func openStore(g *Globals) (*blocks.DiskStore, error) {
	s, err := blocks.OpenDisk(filepath.Join(g.Data, "store"), blocks.DiskOptions{Logger: g.Logger})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// pinFile pins a file's manifest and blocks.
func pinFile(s *blocks.DiskStore, file blocks.ID, m *blocks.Manifest) error {
	return s.Pin(filePin(file), append([]blocks.ID{file}, m.Blocks...)...)
}

// BlocksPutCmd is `p2pc blocks put`.
type BlocksPutCmd struct {
	File      string   `arg:"" type:"existingfile" help:"File to store."`
	BlockSize byteSize `default:"1MiB" help:"Block size (e.g. 256KiB, 1MiB; at most 16MiB). Sizes: KiB, MiB, GiB are powers of 1024, kB, MB, GB powers of 1000."`
	NoPin     bool     `help:"Do not pin the file (gc may then remove it)."`
}

func (c *BlocksPutCmd) Run(g *Globals) error {
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	if c.BlockSize <= 0 || c.BlockSize > blocks.MaxBlockSize {
		return withCode(exitBadInput, fmt.Errorf("--block-size %d outside 1..%d", c.BlockSize, blocks.MaxBlockSize))
	}
	m, id, err := blocks.PutPath(g.Ctx, s, c.File, int(c.BlockSize))
	if err != nil {
		return err
	}
	if !c.NoPin {
		if err := pinFile(s, id, m); err != nil {
			return err
		}
	}
	fmt.Println(id)
	fmt.Fprintf(os.Stderr, "stored %s: %s in %d blocks of %s\n", c.File, fmtBytes(m.Size), len(m.Blocks), fmtBytes(int64(m.BlockSize)))
	return nil
}

// BlocksGetCmd is `p2pc blocks get`.
type BlocksGetCmd struct {
	ID          string        `arg:"" help:"File ID (64 hex digits)."`
	From        []string      `required:"" sep:"," placeholder:"ADDR" help:"Peers to fetch from (host:port of 'p2pc blocks serve')."`
	Output      string        `short:"o" type:"path" placeholder:"FILE" help:"Write the file here (atomically). Without it the file is only fetched into the store."`
	StatsJSON   string        `placeholder:"FILE" help:"Write per-peer fetch statistics as JSON to FILE ('-' for stdout)."`
	Concurrency int           `default:"16" help:"Block requests in flight in total."`
	PerPeer     int           `default:"4" help:"Block requests in flight per peer."`
	Timeout     time.Duration `default:"30s" help:"Deadline of one block request; a peer that misses it is deprioritised."`
	GiveUp      time.Duration `default:"30s" help:"Fail after this long without progress."`
	NoPin       bool          `help:"Do not pin the fetched file."`
	Progress    string        `default:"auto" enum:"auto,always,never" help:"Progress bar on stderr: auto (a terminal and a file over 4 MiB), always, never."`
	NoBulk      bool          `hidden:"" help:"Move block data over gRPC even with peers that offer the bulk path (benchmarks)."`
}

func (c *BlocksGetCmd) Run(g *Globals) error {
	file, err := blocks.ParseID(c.ID)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	creds, err := g.creds()
	if err != nil {
		return err
	}
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	pool := transfer.NewPool(transport.Default(), creds.ClientTLS())
	defer pool.Close()
	f := transfer.NewFetcher(s, pool, transfer.FetchOptions{
		Concurrency:    c.Concurrency,
		PerPeer:        c.PerPeer,
		RequestTimeout: c.Timeout,
		GiveUp:         c.GiveUp,
		NoBulk:         c.NoBulk,
		Logger:         g.Logger,
	})
	bar := &fetchBar{mode: c.Progress}
	var st *transfer.FetchStats
	var ferr error
	if c.Output != "" {
		st, ferr = f.FetchFile(g.Ctx, file, c.From, bar, c.Output)
	} else {
		st, ferr = f.Fetch(g.Ctx, file, c.From, bar)
	}
	bar.finish()
	if st != nil {
		printFetchStats(os.Stderr, st)
		if err := writeStatsJSON(c.StatsJSON, st); err != nil {
			return err
		}
	}
	if ferr != nil {
		return ferr
	}
	m, err := blocks.ReadManifest(g.Ctx, s, file)
	if err != nil {
		return err
	}
	if !c.NoPin {
		if err := pinFile(s, file, m); err != nil {
			return err
		}
	}
	if c.Output != "" {
		fmt.Fprintf(os.Stderr, "wrote %s (%s)\n", c.Output, fmtBytes(m.Size))
	}
	return nil
}

// fetchBar adapts a pb/v3 bar to transfer.Progress. The bar is created
// once the file's size is known, and only if it is worth showing.
type fetchBar struct {
	mode string

	mu  sync.Mutex
	bar *pb.ProgressBar
}

func (b *fetchBar) SetTotal(n int64) {
	tty := isatty.IsTerminal(os.Stderr.Fd())
	show := b.mode == "always" || (b.mode == "auto" && tty && n > 4<<20)
	if !show {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar = pb.Full.New(0).SetTotal(n).Set(pb.Bytes, true).SetWriter(os.Stderr)
	b.bar.Start()
}

func (b *fetchBar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Add64(n)
	}
}

func (b *fetchBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Finish()
		b.bar = nil
	}
}

func printFetchStats(w io.Writer, st *transfer.FetchStats) {
	secs := st.Duration.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(st.FetchedBytes) / secs / (1 << 20)
	}
	fmt.Fprintf(w, "file %s: %d blocks, %d already held, %d fetched (%s) in %.2fs, %.1f MiB/s\n",
		st.File.Short(), st.Blocks, st.Present, st.Fetched, fmtBytes(st.FetchedBytes), secs, rate)
	peers := make([]string, 0, len(st.Peers))
	for p := range st.Peers {
		peers = append(peers, p)
	}
	slices.Sort(peers)
	for _, p := range peers {
		ps := st.Peers[p]
		var notes []string
		if ps.Banned {
			notes = append(notes, "BANNED (served bad data)")
		}
		if ps.Dropped {
			notes = append(notes, "dropped (unreachable)")
		}
		fmt.Fprintf(w, "  from %s: %d blocks, %s; %d requests, %d failed, %d timed out, %d corrupt %s\n",
			p, ps.Blocks, fmtBytes(ps.Bytes), ps.Requests, ps.Failures, ps.Timeouts, ps.Corrupt, strings.Join(notes, ", "))
	}
}

func writeStatsJSON(path string, st *transfer.FetchStats) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("stats json: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("stats json: %w", err)
	}
	return nil
}

// BlocksLsCmd is `p2pc blocks ls`.
type BlocksLsCmd struct{}

func (c *BlocksLsCmd) Run(g *Globals) error {
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	for _, name := range s.Pins() {
		hexID, ok := strings.CutPrefix(name, "file-")
		if !ok {
			fmt.Printf("pin %s\n", name)
			continue
		}
		id, err := blocks.ParseID(hexID)
		if err != nil {
			fmt.Printf("pin %s\n", name)
			continue
		}
		m, err := blocks.ReadManifest(g.Ctx, s, id)
		if err != nil {
			fmt.Printf("%s  manifest missing\n", id)
			continue
		}
		missing, err := blocks.Missing(g.Ctx, s, m)
		if err != nil {
			return err
		}
		state := "complete"
		if len(missing) > 0 {
			state = fmt.Sprintf("%d of %d blocks missing", len(missing), len(m.Blocks))
		}
		fmt.Printf("%s  %12d bytes  %6d blocks  %s\n", id, m.Size, len(m.Blocks), state)
	}
	n, bytes := s.Usage()
	fmt.Fprintf(os.Stderr, "store %s: %d blocks, %s\n", s.Dir(), n, fmtBytes(bytes))
	return nil
}

// BlocksVerifyCmd is `p2pc blocks verify`.
type BlocksVerifyCmd struct {
	ID string `arg:"" optional:"" help:"Check only this file: its manifest and every block present and intact."`
}

func (c *BlocksVerifyCmd) Run(g *Globals) error {
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	if c.ID != "" {
		id, err := blocks.ParseID(c.ID)
		if err != nil {
			return withCode(exitBadInput, err)
		}
		m, err := blocks.ReadManifest(g.Ctx, s, id)
		if err != nil {
			return withCode(exitTaskFailed, err)
		}
		if err := blocks.WriteFile(g.Ctx, s, m, io.Discard); err != nil {
			return withCode(exitTaskFailed, err)
		}
		fmt.Printf("%s ok: %d blocks, %s\n", id, len(m.Blocks), fmtBytes(m.Size))
		return nil
	}
	st, err := s.Verify(g.Ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%d blocks ok (%s), %d corrupt\n", st.Blocks, fmtBytes(st.Bytes), len(st.Corrupt))
	for _, id := range st.Corrupt {
		fmt.Printf("corrupt (quarantined): %s\n", id)
	}
	if len(st.Corrupt) > 0 {
		return withCode(exitTaskFailed, fmt.Errorf("%d corrupt blocks quarantined", len(st.Corrupt)))
	}
	return nil
}

// BlocksGcCmd is `p2pc blocks gc`.
type BlocksGcCmd struct {
	MaxBytes byteSize `default:"0" help:"Keep at most this many bytes of blocks (e.g. 10GiB, or 10GB = 10^9 bytes); 0 removes every unpinned block."`
}

func (c *BlocksGcCmd) Run(g *Globals) error {
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.GC(g.Ctx, int64(c.MaxBytes))
	if err != nil {
		return err
	}
	fmt.Printf("removed %d blocks (%s); %d blocks (%s) held, %s pinned\n",
		st.Removed, fmtBytes(st.RemovedBytes), st.Blocks, fmtBytes(st.Bytes), fmtBytes(st.PinnedBytes))
	return nil
}

// BlocksServeCmd is `p2pc blocks serve`.
type BlocksServeCmd struct {
	Listen string `default:"127.0.0.1:0" help:"Address to listen on (host:port; port 0 picks one)."`

	// Hidden: for tests and benchmarks only.
	RateLimit   byteSize `hidden:"" help:"Cap the bytes per second served (tests and benchmarks)."`
	serveFaults          // hidden --fault-* flags, only in builds with the p2pcfault tag
}

func (c *BlocksServeCmd) Run(g *Globals) error {
	creds, err := g.creds()
	if err != nil {
		return err
	}
	s, err := openStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	log := g.Logger.With("component", "blocks.serve")
	tr, addr, err := transport.Default().Lookup(c.Listen)
	var lis net.Listener
	if err == nil {
		lis, err = tr.Listen(g.Ctx, addr)
	}
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("listen: %w", err))
	}
	gs := grpc.NewServer(transfer.GRPCServerOptions(creds.ServerTLS(), g.Logger)...)
	opts := transfer.ServerOptions{Logger: g.Logger, RateLimit: int64(c.RateLimit)}
	c.apply(&opts, log)
	srv := transfer.NewServer(s, opts)
	srv.Register(gs)
	// Block data also goes over the bulk path, on the same port.
	glis := srv.Listener(lis, tr, creds.ServerTLS())

	fmt.Printf("listening %s\n", transport.AddrOf(lis))
	n, bytes := s.Usage()
	log.Info("serving", "addr", transport.AddrOf(lis), "store", s.Dir(), "blocks", n, "bytes", bytes)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(glis) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-g.Ctx.Done():
	}
	stopGRPC(gs, 5*time.Second)
	<-served
	log.Info("stopped")
	return nil
}

// stopGRPC stops gs gracefully, forcing it after d.
func stopGRPC(gs *grpc.Server, d time.Duration) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
}

// byteSize is a flag value in bytes, read by spec.ParseSize as a spec's
// sizes are: 512, 64KiB, 1MiB, 10GiB (powers of 1024) or 2GB, 500MB
// (powers of 1000); units are case-sensitive.
type byteSize int64

func (b *byteSize) UnmarshalText(text []byte) error {
	v, err := spec.ParseSize(string(text))
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

var (
	_ transfer.Progress      = (*fetchBar)(nil)
	_ transfer.ProgressTotal = (*fetchBar)(nil)
)
