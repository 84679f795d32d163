// Command p2pc is the peer-to-peer parallel computing platform's CLI: run a
// job, join a swarm as a volunteer, move blocks, and reproduce the seed
// papers' benchmarks.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// Exit codes, documented in README.md's table; a test keeps the two
// together.
const (
	exitOK          = 0
	exitInternal    = 1
	exitBadInput    = 2
	exitTaskFailed  = 3
	exitLocalDisk   = 4
	exitIncomplete  = 5 // p2pc status: the job is running or was interrupted
	exitNoJob       = 6 // attach, fetch, cancel: no job of the swarm matches, or several do
	exitDenied      = 7 // cancel: not the job's submitter
	exitInterrupted = 130
)

// Globals are the flags every subcommand sees, plus what main derives from
// them. Subcommands receive *Globals in their Run method.
type Globals struct {
	Data     string `help:"Node data directory (block store, plugin cache)." env:"P2PC_DATA" type:"path" placeholder:"DIR"`
	LogLevel string `help:"Log level: debug, info, warn, error." env:"P2PC_LOG_LEVEL" default:"warn" enum:"debug,info,warn,error"`
	LogJSON  bool   `help:"Write logs as JSON lines." env:"P2PC_LOG_JSON"`
	SwarmFlags
	// CPUProfile is for profiling benchmarks (hidden).
	CPUProfile string `name:"cpuprofile" hidden:"" help:"Write a CPU profile of this process to FILE." type:"path" placeholder:"FILE"`
	// MemProfile is for profiling memory (hidden): the heap profile is
	// rewritten every 5s while the process runs.
	MemProfile string `name:"memprofile" hidden:"" help:"Write a heap profile of this process to FILE (the one nearest the peak, taken each second)." type:"path" placeholder:"FILE"`

	Ctx    context.Context `kong:"-"`
	Logger *slog.Logger    `kong:"-"`
}

// CLI is the kong root: global flags and one field per subcommand.
type CLI struct {
	Globals

	Run      RunCmd      `cmd:"" help:"Run a job described by a YAML spec."`
	Join     JoinCmd     `cmd:"" help:"Volunteer this machine: run tasks for the swarm until stopped."`
	Peers    PeersCmd    `cmd:"" help:"List the live swarm."`
	Jobs     JobsCmd     `cmd:"" help:"List the jobs handed to the swarm (p2pc run --detach)."`
	Attach   AttachCmd   `cmd:"" help:"Follow a job of the swarm to its end, then write its output folder."`
	Fetch    FetchCmd    `cmd:"" help:"Write the output folder of a job of the swarm that ended."`
	Cancel   CancelCmd   `cmd:"" help:"Cancel a job of the swarm (its submitter only)."`
	Validate ValidateCmd `cmd:"" help:"Check a job spec without running it."`
	Logs     LogsCmd     `cmd:"" help:"Show a task's attempts with their full errors (stderr, stacks)."`
	Report   ReportCmd   `cmd:"" help:"Write a job's report.json from its job database (during a run too)."`
	Export   ExportCmd   `cmd:"" help:"Write out the inline task outputs kept in a job's database."`
	Status   StatusCmd   `cmd:"" help:"Show a job's state from its database (while it runs, too)."`
	Blocks   BlocksCmd   `cmd:"" help:"Put, get, list, verify and collect content-addressed blocks."`
	Swarm    SwarmCmd    `cmd:"" help:"Create or show the swarm secret that lets machines work together."`
	Version  VersionCmd  `cmd:"" help:"Print the version and protocol versions."`
	Bench    BenchCmd    `cmd:"" help:"Reproduce the seed papers' experiments."`
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	defer tuneGC()()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("p2pc"),
		kong.Description("p2pc: the poor man's supercomputer. Farm a job's tasks out to spare machines on the LAN."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Configuration(yamlConfig), // p2pc join --config FILE
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "p2pc:", err)
		return exitInternal
	}
	args, tok, err := takeSwarmToken(args, os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "p2pc:", err)
		return exitBadInput
	}
	kctx, err := parser.Parse(expandUIFlag(args))
	if err != nil {
		fmt.Fprintln(os.Stderr, "p2pc:", err)
		return exitBadInput
	}
	dropSwarmEnv()
	if tok.given {
		cli.Globals.Swarm, cli.SwarmGiven = tok.token, true
	}
	if cli.Data == "" {
		cli.Data = defaultDataDir()
	}
	cli.Ctx = ctx
	cli.Logger = newLogger(cli.LogLevel, cli.LogJSON)
	slog.SetDefault(cli.Logger)
	if cli.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cli.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "p2pc:", err)
			return exitBadInput
		}
		defer stopProfile()
	}
	if cli.MemProfile != "" {
		defer startMemProfile(ctx, cli.MemProfile)()
	}

	err = kctx.Run(&cli.Globals)
	// The cgroups of this process's plugin processes are gone by now;
	// remove their parent (a killed p2pc's is swept by the next one).
	if cerr := sandbox.CloseCgroups(); cerr != nil {
		cli.Logger.Warn("remove cgroups", "err", cerr)
	}
	activeTrace.mark("cgroups removed: exit")
	if err == nil {
		return exitOK
	}
	var ec *exitError
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(os.Stderr, "p2pc:", ec.err)
		}
		return ec.code
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "p2pc: interrupted:", err)
		return exitInterrupted
	}
	fmt.Fprintln(os.Stderr, "p2pc:", err)
	return exitInternal
}

// exitError carries a specific exit code out of a Run method.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that main exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// startCPUProfile writes a CPU profile to path until the returned stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// startMemProfile writes a heap profile to path every second while the
// heap is larger than it was at the last one written (so the file ends
// up holding the profile nearest to the peak), until stop.
func startMemProfile(ctx context.Context, path string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var peak uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc <= peak {
				continue
			}
			peak = ms.HeapAlloc
			runtime.GC()
			var buf bytes.Buffer
			if err := pprof.WriteHeapProfile(&buf); err == nil {
				os.WriteFile(path, buf.Bytes(), 0o644)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// defaultDataDir is $XDG_DATA_HOME/p2pc, else ~/.local/share/p2pc, else a
// folder in the temp dir.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "p2pc")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "p2pc")
	}
	return filepath.Join(os.TempDir(), "p2pc")
}

// newLogger returns a text (or JSON) logger on stderr at level.
func newLogger(level string, json bool) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: lv}
	if json {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
