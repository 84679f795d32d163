//go:build linux

package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The test binary is also the plugin (habit 4: real processes, no build
// step). The host scrubs the environment, so the switch travels in
// Config.Env:
//
//	P2PC_TEST_PLUGIN=task        serve testTask
//	P2PC_TEST_PLUGIN=junk        print junk on stdout, then sleep
//	P2PC_TEST_PLUGIN=silent      print nothing, sleep (start timeout)
//	P2PC_TEST_PLUGIN=startcrash  write to stderr and exit 7 before serving
//	P2PC_TEST_PLUGIN=old         a plugin of SDK protocol 2 (no RunBatch)
//	P2PC_TEST_PLUGIN=slowstart   serve testTask after P2PC_TEST_START_MS; with
//	                             P2PC_TEST_FIRST_FAST=1 the pool's first
//	                             process at once (a marker in the pool's HOME)
//
// P2PC_TEST_HOST=1 makes it a host instead: a pool running one long task,
// printing the plugin's pid, for the host-SIGKILL test. P2PC_TEST_HOST=busy
// and =sweep are the hosts of TestSweepAcrossPIDNamespaces.
const (
	envPlugin = "P2PC_TEST_PLUGIN"
	envHost   = "P2PC_TEST_HOST"
)

func TestMain(m *testing.M) {
	switch mode := os.Getenv(envPlugin); mode {
	case "":
	case "task":
		earlyLog = sdk.Logger() // made before Serve: writes to file descriptor 2
		sdk.Serve(testTask{})
		os.Exit(0)
	case "old":
		serveOldPlugin()
		os.Exit(0)
	case "slowstart":
		f, err := os.OpenFile(filepath.Join(os.Getenv("HOME"), "first"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
		}
		if err != nil || os.Getenv("P2PC_TEST_FIRST_FAST") == "" {
			ms, _ := strconv.Atoi(os.Getenv("P2PC_TEST_START_MS"))
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		sdk.Serve(testTask{})
		os.Exit(0)
	case "junk":
		fmt.Println("hello, I am not a plugin")
		time.Sleep(30 * time.Second)
		os.Exit(0)
	case "silent":
		time.Sleep(time.Minute)
		os.Exit(0)
	case "startcrash":
		fmt.Fprintln(os.Stderr, "init failed: boom")
		os.Exit(7)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", envPlugin, mode)
		os.Exit(2)
	}
	switch os.Getenv(envHost) {
	case "":
	case "busy":
		os.Exit(busyHostMain())
	case "sweep":
		os.Exit(sweepHostMain())
	default:
		hostMain()
		os.Exit(0)
	}
	code := m.Run()
	sandbox.CloseCgroups()
	if err := writeHostileReport(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile report:", err)
		code = 1
	}
	os.Exit(code)
}

var earlyLog *slog.Logger

// params of testTask's Run.
type params struct {
	Op    string `json:"op"`
	Msg   string `json:"msg,omitempty"`
	Code  int    `json:"code,omitempty"`
	MS    int    `json:"ms,omitempty"`
	Child bool   `json:"child,omitempty"` // sleep: start `sleep 100` first
	Ctx   bool   `json:"ctx,omitempty"`   // sleep: honour ctx
	Arg   string `json:"arg,omitempty"`   // attack: its target
}

type testTask struct{}

func (testTask) Describe() sdk.Info {
	return sdk.Info{Name: "pluginhost-test", Version: "1.0", Portable: true}
}

func (testTask) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	pid := &sdk.Result{Data: []byte(strconv.Itoa(os.Getpid()))}
	switch p.Op {
	case "echo":
		return &sdk.Result{Data: []byte(p.Msg)}, nil
	case "pid":
		time.Sleep(time.Duration(p.MS) * time.Millisecond)
		return pid, nil
	case "fail":
		return nil, errors.New(p.Msg)
	case "panicin": // in the task goroutine: the SDK recovers it
		panic(p.Msg)
	case "write": // an output file
		if err := os.WriteFile(req.WorkDir+"/out.txt", []byte(p.Msg), 0o644); err != nil {
			return nil, err
		}
		return &sdk.Result{Files: []string{"out.txt"}}, nil
	case "litter": // leaves a file, returns none
		if err := os.WriteFile(req.WorkDir+"/litter", []byte(p.Msg), 0o644); err != nil {
			return nil, err
		}
		return pid, nil
	case "empty": // is the work dir empty?
		names, err := os.ReadDir(req.WorkDir)
		if err != nil {
			return nil, err
		}
		return &sdk.Result{Data: []byte(strconv.Itoa(os.Getpid()) + " " + strconv.Itoa(len(names)))}, nil
	case "exit":
		writeFD2(p.Msg + "\n")
		os.Exit(p.Code)
	case "crashfirst": // dies on attempt 0, works on a retry
		if req.Attempt == 0 {
			writeFD2("attempt 0 dies\n")
			os.Exit(3)
		}
		return pid, nil
	case "panic": // outside the task goroutine: not recovered by the SDK
		go panic(p.Msg)
		select {}
	case "killself":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "sleep":
		if p.Child {
			c := exec.Command("sleep", "100")
			if err := c.Start(); err != nil {
				return nil, err
			}
			host.Partial(ctx, []byte("child "+strconv.Itoa(c.Process.Pid)))
		}
		host.Partial(ctx, []byte("pid "+strconv.Itoa(os.Getpid())))
		d := time.Duration(p.MS) * time.Millisecond
		if !p.Ctx {
			time.Sleep(d)
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
			return pid, nil
		}
	case "waitchild": // runs `sleep MS/1000` and fails unless it ends well
		c := exec.Command("sleep", strconv.FormatFloat(float64(p.MS)/1000, 'f', 3, 64))
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("child: %w", err)
		}
		return pid, nil
	case "escape": // a descendant leaves the process group holding fd 2, then the plugin dies
		c := exec.Command("sleep", "100")
		c.Stderr = os.NewFile(2, "fd2")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			return nil, err
		}
		host.Partial(ctx, []byte("child "+strconv.Itoa(c.Process.Pid)))
		writeFD2("leaving now\n")
		os.Exit(4)
	case "env":
		b, err := json.Marshal(os.Environ())
		return &sdk.Result{Data: b}, err
	case "cwd":
		wd, err := os.Getwd()
		return &sdk.Result{Data: []byte(wd)}, err
	case "stdin":
		ch := make(chan string, 1)
		go func() {
			n, err := os.Stdin.Read(make([]byte, 1))
			ch <- fmt.Sprintf("n=%d err=%v", n, err)
		}()
		select {
		case s := <-ch:
			return &sdk.Result{Data: []byte(s)}, nil
		case <-time.After(2 * time.Second):
			return &sdk.Result{Data: []byte("blocked")}, nil
		}
	case "log":
		sdk.Logger().Warn("warn via sdk logger", "k", 7) // os.Stderr after Serve: go-plugin's stdio stream
		earlyLog.Error("error via early logger", "k", 8) // file descriptor 2
		fmt.Fprintln(os.Stderr, "plain line via os.Stderr")
		writeFD2("plain line via fd 2\n")
		writeFD2(`{"@message": 42, "@level": 7, "@timestamp": 1}` + "\n") // would panic go-plugin's parser
		fmt.Println("stdout line")
		return pid, nil
	case "progress":
		if err := host.Progress(ctx, 0.5, "half"); err != nil {
			return nil, err
		}
		if err := host.Partial(ctx, []byte("part")); err != nil {
			return nil, err
		}
		return pid, nil
	case "attack": // hostile_test.go
		return attack(p.Msg, p.Arg)
	}
	return nil, fmt.Errorf("unknown op %q", p.Op)
}

func (testTask) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	return &sdk.Result{Data: []byte(strconv.Itoa(len(req.Tasks)))}, nil
}

func writeFD2(s string) { syscall.Write(2, []byte(s)) }

// hostMain runs a pool with one long task and prints the plugin's pid.
func hostMain() {
	pl := testPool(1)
	req := &sdk.Request{TaskID: "long", Params: mustJSON(params{Op: "sleep", MS: 100_000, Child: true})}
	_, err := pl.Run(context.Background(), req, printHost{}, 0)
	fmt.Println("run returned:", err)
}

// testPool is a pool of the test binary as its plugin, for the host modes.
func testPool(size int) *Pool {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	sum, err := digest.File(exe)
	if err != nil {
		panic(err)
	}
	return NewPool(Config{Path: exe, Checksum: sum, Env: []string{envPlugin + "=task"}}, size)
}

// busyHostMain runs short tasks in two plugin processes until stdin
// closes. It prints "dir <private folder>" after its first task and
// "done <tasks> <failures>" at the end; it exits 1 if a task failed.
func busyHostMain() int {
	pl := testPool(2)
	defer pl.Close()
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				_, err := pl.Run(context.Background(), &sdk.Request{TaskID: id, Params: mustJSON(params{Op: "pid", MS: 5})}, nil, 0)
				if err != nil {
					fmt.Fprintln(os.Stderr, "task", id, "failed:", err)
					failed.Add(1)
				}
				if n.Add(1) == 1 {
					fmt.Println("dir", pl.privateRoot(), pl.dirs.sock)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("done", n.Load(), failed.Load())
	if failed.Load() > 0 {
		return 1
	}
	return 0
}

// sweepHostMain starts and closes a pool five times (each first start
// sweeps the folders of dead hosts), running a task in each; it exits 1
// if a task failed.
func sweepHostMain() int {
	for range 5 {
		pl := testPool(1)
		_, err := pl.Run(context.Background(), &sdk.Request{TaskID: "t", Params: mustJSON(params{Op: "pid"})}, nil, 0)
		pl.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sweeping host's task failed:", err)
			return 1
		}
	}
	return 0
}

type printHost struct{ sdk.UnsupportedHost }

func (printHost) Progress(context.Context, float64, string) error { return nil }
func (printHost) Partial(_ context.Context, b []byte) error {
	fmt.Println(string(b))
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
