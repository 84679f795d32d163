package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

func init() { Register(transferSuite{}) }

// Preon 4.4, Table 1: 1 GiB between two DAS-5 nodes, 10 runs.
const (
	preonP2PMiBps   = 73.42
	preonRsyncMiBps = 104.8
	preonTheoretic  = 125.0
)

// transferSuite is Preon 4.4. The measurement is benchmarks/transfer's
// own script (run.sh): this suite runs it, reads the JSON it writes and
// puts Preon's table beside its figures. It asks nothing of the script
// but its outputs.
type transferSuite struct{}

func (transferSuite) Info() Info {
	// Folder: results/transfer belongs to the script when run by hand.
	return Info{Name: "transfer", Folder: "file-transfer", Title: "File transfer: p2pc blocks vs rsync", Paper: "Preon 4.4", Order: 40}
}

type transferConfig struct {
	// Script is relative to the repository.
	Script  string            `yaml:"script"`
	Env     map[string]string `yaml:"env"`
	Timeout string            `yaml:"timeout"`
}

// The script's outputs, read loosely: fields it does not write stay zero.
type transferSingle struct {
	FileMiB  float64 `json:"file_mib"`
	Runs     int     `json:"runs"`
	Variants []struct {
		Storage       string               `json:"storage"`
		Seconds       map[string][]float64 `json:"seconds"`
		MedianSeconds map[string]float64   `json:"median_seconds"`
		MedianMiBps   map[string]float64   `json:"median_mib_per_s"`
	} `json:"variants"`
}

type transferMulti struct {
	FileMiB float64 `json:"file_mib"`
	Cap     string  `json:"cap_per_source"`
	Storage string  `json:"storage"`
	Rsync   struct {
		Seconds float64 `json:"seconds"`
		MiBps   float64 `json:"mib_per_s"`
	} `json:"rsync_one_capped_source"`
	P2PC []struct {
		Sources       int       `json:"sources"`
		Seconds       []float64 `json:"seconds"`
		MedianSeconds float64   `json:"median_seconds"`
		MiBps         float64   `json:"mib_per_s"`
		Speedup       float64   `json:"speedup_vs_1"`
		PerSource     string    `json:"blocks_per_source"`
	} `json:"p2pc"`
}

func (transferSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	d := &transferData{}
	script, timeout, err := transferSetup(env, &d.cfg)
	if err != nil {
		return nil, err
	}
	outDir := filepath.Join(env.WorkDir, "script-out")
	phase := env.Progress.Phase("transfer", 1)
	defer phase.Done()
	if err := env.runScript(ctx, script, outDir, d.cfg.Env, timeout); err != nil {
		return nil, err
	}
	phase.Step("run.sh done")
	if err := d.read(env, outDir); err != nil {
		return nil, err
	}
	res := &Result{}
	csvRows := d.tabulate(res)
	if err := d.writeData(env, csvRows); err != nil {
		return nil, err
	}
	if err := d.writePlots(env); err != nil {
		return nil, err
	}
	if err := d.writeSummary(env); err != nil {
		return nil, err
	}
	return res, nil
}

// transferData is what the transfer benchmark's script measured: its
// single-source and multi-source parts (nil where it wrote none) and its
// raw outputs, by file name.
type transferData struct {
	cfg    transferConfig
	single *transferSingle
	multi  *transferMulti
	raw    map[string]json.RawMessage
}

// transferSetup reads the configuration into cfg and finds the script.
func transferSetup(env *Env, cfg *transferConfig) (script string, timeout time.Duration, err error) {
	*cfg = transferConfig{Script: "benchmarks/transfer/run.sh", Env: map[string]string{}, Timeout: "20m"}
	if err := env.Config.Decode("transfer", env.Quick, cfg); err != nil {
		return "", 0, err
	}
	timeout, err = time.ParseDuration(cfg.Timeout)
	if err != nil {
		return "", 0, fmt.Errorf("transfer: timeout: %w", err)
	}
	script = filepath.Join(env.Root, filepath.FromSlash(cfg.Script))
	if _, err := os.Stat(script); err != nil {
		return "", 0, fmt.Errorf("transfer: the transfer benchmark's script is not there (%w): it is benchmarks/transfer's, this suite only runs it", err)
	}
	return script, timeout, nil
}

// read takes the script's outputs from outDir, keeping copies with the
// results.
func (d *transferData) read(env *Env, outDir string) error {
	d.raw = map[string]json.RawMessage{}
	for _, name := range []string{"single_source.json", "multi_source.json"} {
		b, err := os.ReadFile(filepath.Join(outDir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("transfer: %w", err)
		}
		d.raw[name] = b
		if err := os.WriteFile(env.path(name), b, 0o644); err != nil {
			return fmt.Errorf("transfer: %w", err)
		}
		switch name {
		case "single_source.json":
			d.single = &transferSingle{}
			err = json.Unmarshal(b, d.single)
		default:
			d.multi = &transferMulti{}
			err = json.Unmarshal(b, d.multi)
		}
		if err != nil {
			return fmt.Errorf("transfer: read the script's %s: %w", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "summary.md")); err == nil {
		if err := os.WriteFile(env.path("script-summary.md"), b, 0o644); err != nil {
			return fmt.Errorf("transfer: %w", err)
		}
	}
	if d.single == nil && d.multi == nil {
		return fmt.Errorf("transfer: %s wrote neither single_source.json nor multi_source.json into %s", d.cfg.Script, outDir)
	}
	return nil
}

// tabulate adds the headline rows and returns the CSV rows.
func (d *transferData) tabulate(res *Result) (csvRows [][]string) {
	if d.single != nil {
		for _, v := range d.single.Variants {
			get, rsync := v.MedianMiBps["p2pc_get_output"], v.MedianMiBps["rsync"]
			ratio := "–"
			if get > 0 && rsync > 0 {
				ratio = fmt.Sprintf("%.2f", get/rsync)
			}
			res.Add("1 source, loopback, "+v.Storage, fmt.Sprintf("p2pc / rsync MiB/s, median [95%% CI] of %d runs (ratio of medians), whole command each", d.single.Runs),
				fmt.Sprintf("%s / %s (%s)", mibpsCI(d.single.FileMiB, v.Seconds["p2pc_get_output"]).Format(f1), mibpsCI(d.single.FileMiB, v.Seconds["rsync"]).Format(f1), ratio),
				fmt.Sprintf("%.2f / %.1f (%.2f)", preonP2PMiBps, preonRsyncMiBps, preonP2PMiBps/preonRsyncMiBps))
			for _, tool := range slices.Sorted(maps.Keys(v.MedianMiBps)) {
				csvRows = append(csvRows, []string{"single", v.Storage, tool, "1", f1(d.single.FileMiB), f3(v.MedianSeconds[tool]), f1(v.MedianMiBps[tool])})
			}
		}
	}
	if d.multi != nil {
		for _, m := range d.multi.P2PC {
			csvRows = append(csvRows, []string{"multi", d.multi.Storage, "p2pc_get_output", fmt.Sprint(m.Sources), f1(d.multi.FileMiB), f3(m.MedianSeconds), f1(m.MiBps)})
		}
		csvRows = append(csvRows, []string{"multi", d.multi.Storage, "rsync_one_source", "1", f1(d.multi.FileMiB), f3(d.multi.Rsync.Seconds), f1(d.multi.Rsync.MiBps)})
		if n := len(d.multi.P2PC); n > 0 {
			last := d.multi.P2PC[n-1]
			res.Add(fmt.Sprintf("%d sources capped at %s", last.Sources, d.multi.Cap), fmt.Sprintf("p2pc MiB/s, median [95%% CI] of %d runs (speedup vs 1 source; rsync from 1, one run)", len(last.Seconds)),
				fmt.Sprintf("%s (%.2fx; rsync %.1f)", mibpsCI(d.multi.FileMiB, last.Seconds).Format(f1), last.Speedup, d.multi.Rsync.MiBps), "not implemented in Preon (future work)")
		}
	}
	res.Note("measured by %s (its own parameters: %s); Preon copied 1 GiB between two DAS-5 nodes over the network, here the single-source part runs on loopback and the multi-source part through tc-tbf-capped veths in network namespaces", d.cfg.Script, envNote(d.cfg.Env))
	return csvRows
}

// writeData writes transfer.csv and transfer.json.
func (d *transferData) writeData(env *Env, csvRows [][]string) error {
	if err := env.WriteCSV("transfer.csv", []string{"part", "storage", "tool", "sources", "file_mib", "median_s", "mib_per_s"}, csvRows); err != nil {
		return err
	}
	if err := env.WriteJSON("transfer.json", map[string]any{
		"machine": env.Machine, "quick": env.Quick, "script": d.cfg.Script, "script_env": d.cfg.Env,
		"preon":          map[string]float64{"p2p_mib_per_s": preonP2PMiBps, "rsync_mib_per_s": preonRsyncMiBps, "theoretic_mib_per_s": preonTheoretic},
		"script_outputs": d.raw,
	}); err != nil {
		return err
	}
	return nil
}

// singleBars returns the single-source chart's categories and its p2pc
// and rsync rates, Preon's first.
func (d *transferData) singleBars() (cats []string, p2p, rs []float64) {
	cats = []string{"Preon (DAS-5, 1 GiB)"}
	p2p, rs = []float64{preonP2PMiBps}, []float64{preonRsyncMiBps}
	if d.single != nil {
		for _, v := range d.single.Variants {
			get, rsync := v.MedianMiBps["p2pc_get_output"], v.MedianMiBps["rsync"]
			cats = append(cats, fmt.Sprintf("this machine, %s (%.0f MiB)", v.Storage, d.single.FileMiB))
			p2p, rs = append(p2p, orNaN(get)), append(rs, orNaN(rsync))
		}
	}
	return cats, p2p, rs
}

// writePlots writes transfer.svg and, with a multi-source part,
// multisource.svg.
func (d *transferData) writePlots(env *Env) error {
	cats, p2p, rs := d.singleBars()
	theo := nan(len(cats))
	theo[0] = preonTheoretic
	// Error bars: the runs' 95% intervals (the Preon row has none).
	pLo, pHi, rLo, rHi := nan(len(cats)), nan(len(cats)), nan(len(cats)), nan(len(cats))
	if d.single != nil {
		off := len(cats) - len(d.single.Variants)
		for i, v := range d.single.Variants {
			a, b := mibpsCI(d.single.FileMiB, v.Seconds["p2pc_get_output"]), mibpsCI(d.single.FileMiB, v.Seconds["rsync"])
			pLo[off+i], pHi[off+i], rLo[off+i], rHi[off+i] = a.Lo, a.Hi, b.Lo, b.Hi
		}
	}
	if err := env.WriteSVG("transfer.svg", (&Bars{
		Title: "Single-source transfer: p2pc (Preon) vs rsync", YLabel: "MiB/s",
		Categories: cats,
		Groups:     []BarGroup{{Name: "p2pc blocks get -o (Preon in the paper)", Values: p2p, Lo: pLo, Hi: pHi}, {Name: "rsync", Values: rs, Lo: rLo, Hi: rHi}},
		Marks:      []BarGroup{{Name: "DAS-5 link: 125 MiB/s", Values: theo, Color: "#444"}},
		Format:     func(v float64) string { return fmt.Sprintf("%.0f", v) },
		Note:       "this machine: loopback, medians of benchmarks/transfer/run.sh's runs, bars: 95% CI; " + quickNote(env),
	}).SVG()); err != nil {
		return err
	}
	if d.multi != nil && len(d.multi.P2PC) > 0 {
		var xs, ys, lo, hi, ideal []float64
		for _, m := range d.multi.P2PC {
			iv := mibpsCI(d.multi.FileMiB, m.Seconds)
			xs, ys = append(xs, float64(m.Sources)), append(ys, m.MiBps)
			lo, hi = append(lo, iv.Lo), append(hi, iv.Hi)
		}
		for _, m := range d.multi.P2PC {
			ideal = append(ideal, float64(m.Sources)*d.multi.P2PC[0].MiBps/float64(max(d.multi.P2PC[0].Sources, 1)))
		}
		if err := env.WriteSVG("multisource.svg", (&Plot{
			Title:  fmt.Sprintf("Fetching from several sources, each capped at %s", d.multi.Cap),
			XLabel: "sources", YLabel: "MiB/s",
			Series: []Series{
				{Name: "p2pc blocks get (median, 95% CI)", X: xs, Y: ys, Lo: lo, Hi: hi, Kind: LinePoints, Radius: 4},
				{Name: "linear: sources x the first", X: xs, Y: ideal, Kind: Line, Color: "#999", Dashed: true},
			},
			XInt: true, XPad: 0.05,
			HLines: []HLine{{Y: d.multi.Rsync.MiBps, Label: "rsync from one capped source", Color: "#D55E00", Dashed: true}},
			YZero:  true,
			Note:   fmt.Sprintf("%.0f MiB, network namespaces with tc tbf; %s", d.multi.FileMiB, quickNote(env)),
		}).SVG()); err != nil {
			return err
		}
	}

	return nil
}

// writeSummary writes summary.md.
func (d *transferData) writeSummary(env *Env) error {
	var md Markdown
	md.P("# File transfer (Preon 4.4)")
	md.P("%s", quickBanner(env))
	md.P("Measured by `%s` (the transfer benchmark's own script, run unchanged; its environment here: %s). Its own summary is copied as [script-summary.md](script-summary.md), its raw outputs as single_source.json and multi_source.json.", d.cfg.Script, envNote(d.cfg.Env))
	rows := [][]string{{"Preon (DAS-5, 1 GiB, 10 runs)", f2(preonP2PMiBps), f1(preonRsyncMiBps), f2(preonP2PMiBps / preonRsyncMiBps), "125 (link)"}}
	if d.single != nil {
		for _, v := range d.single.Variants {
			get, rsync := v.MedianMiBps["p2pc_get_output"], v.MedianMiBps["rsync"]
			rows = append(rows, []string{fmt.Sprintf("this machine, loopback, %s (%.0f MiB, median of %d)", v.Storage, d.single.FileMiB, d.single.Runs), f1(get), f1(rsync), ratioStr(get, rsync), "–"})
		}
	}
	md.Table([]string{"", "p2pc / Preon (MiB/s)", "rsync (MiB/s)", "ratio", "limit"}, rows)
	if d.multi != nil {
		var mrows [][]string
		for _, m := range d.multi.P2PC {
			mrows = append(mrows, []string{fmt.Sprint(m.Sources), f2(m.MedianSeconds), f1(m.MiBps), f2(m.Speedup), m.PerSource})
		}
		md.P("**Several sources** (Preon's future work: \"download from multiple peers at once\"): a %.0f MiB file, each source's uplink capped at %s (tc tbf), stores on %s. rsync from one capped source: %.1f MiB/s.", d.multi.FileMiB, d.multi.Cap, d.multi.Storage, d.multi.Rsync.MiBps)
		md.Table([]string{"sources", "seconds", "MiB/s", "speedup vs 1", "blocks per source"}, mrows)
	}
	md.P("![single source](transfer.svg)")
	if d.multi != nil && len(d.multi.P2PC) > 0 {
		md.P("![several sources](multisource.svg)")
	}
	md.P("Files: transfer.json (Preon's figures and the script's outputs), transfer.csv, transfer.svg, multisource.svg, single_source.json, multi_source.json, script-summary.md.")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return err
	}
	return nil
}

// runScript runs the transfer script with OUT set, relaying its log lines
// as progress.
func (e *Env) runScript(ctx context.Context, script, out string, extra map[string]string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "OUT="+out)
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		cmd.Env = append(cmd.Env, k+"="+extra[k])
	}
	// The script cleans up on TERM (its trap); the group gets it.
	cmd.SysProcAttr = procGroup()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 30 * time.Second
	logPath := filepath.Join(e.WorkDir, "run.sh.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("transfer: %w", err)
	}
	defer logf.Close()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = logf, pw
	var wg sync.WaitGroup
	var last []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			e.Progress.Printf("  transfer: %s", line)
			last = append(last, line)
			if len(last) > 20 {
				last = last[1:]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err = cmd.Run()
	pw.Close()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("transfer: %s: %w\n%s", filepath.Base(script), err, strings.Join(last, "\n"))
	}
	return nil
}

func orNaN(x float64) float64 {
	if x == 0 {
		return math.NaN()
	}
	return x
}

func ratioStr(a, b float64) string {
	if a > 0 && b > 0 {
		return f2(a / b)
	}
	return "–"
}

func envNote(m map[string]string) string {
	if len(m) == 0 {
		return "its defaults"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

// mibpsCI is the MiB/s of moving mib MiB in each of the runs' seconds,
// median with its 95% interval.
func mibpsCI(mib float64, seconds []float64) Interval {
	var xs []float64
	for _, sec := range seconds {
		if sec > 0 {
			xs = append(xs, mib/sec)
		}
	}
	return MedianCI(xs)
}
