package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileName is the name of the report inside a job's output folder.
const FileName = "report.json"

// Format is the version of the report layout.
const Format = 1

// Job states.
const (
	StateRunning     = "running"
	StateComplete    = "complete"
	StateFailed      = "failed"
	StateInterrupted = "interrupted"
)

// Task states.
const (
	TaskPending = "pending"
	TaskRunning = "running"
	TaskDone    = "done"
	TaskFailed  = "failed"
)

// Attempt outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeTaskError = "task_error" // the task returned an error
	OutcomeCrashed   = "crashed"    // the plugin process died during the call
	OutcomeTimeout   = "timeout"    // the task overran its timeout and was killed
	OutcomeCanceled  = "canceled"   // the run was interrupted
	OutcomeLost      = "lost"       // infrastructure failure (peer gone); does not count against retries
	OutcomeRejected  = "rejected"   // the plugin's Verify rejected the output: a lost vote
)

// Report is the content of report.json.
type Report struct {
	Format   int       `json:"format"`
	JobID    string    `json:"job_id"`
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	State    string    `json:"state"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Run names the run of the job in its output folder: random when the
	// folder's first run starts, kept by every rerun that resumes it.
	// Peers hand results over only to a rerun of the same run.
	Run     string  `json:"run,omitempty"`
	Node    string  `json:"node"`
	Plugin  Plugin  `json:"plugin"`
	Summary Summary `json:"summary"`
	// Outputs are the job's final artifacts (from the reduce step),
	// relative to the output folder.
	Outputs []string `json:"outputs,omitempty"`
	// Warnings say what the run could not do as the spec asked.
	Warnings []string `json:"warnings,omitempty"`
	// Excluded are peers that lost too many votes (redundant execution).
	Excluded []Exclusion `json:"excluded,omitempty"`
	// Peers is each voting peer's record (redundant execution only).
	Peers []PeerTrust `json:"peers,omitempty"`
	// SpotChecks is the record of the submitter's own re-runs of accepted
	// results (verify.spot_check).
	SpotChecks *SpotChecks `json:"spot_checks,omitempty"`
	Tasks      []Task      `json:"tasks"`
}

// Plugin identifies the plugin that ran the job.
type Plugin struct {
	Path    string `json:"path"`
	Digest  string `json:"digest"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Summary counts tasks by state.
type Summary struct {
	Total  int `json:"total"`
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// Reused counts the done tasks whose results this run took from an
	// earlier run into the same output folder rather than running them
	// (Task.Reused).
	Reused int `json:"reused"`
}

// Task is one task's record.
type Task struct {
	ID     string          `json:"id"`
	Params json.RawMessage `json:"params"`
	State  string          `json:"state"`
	// Peer is the node that produced the accepted result.
	Peer     string    `json:"peer,omitempty"`
	PeerID   string    `json:"peer_id,omitempty"`
	Attempts []Attempt `json:"attempts"`
	// Error says why a failed task failed: the last attempt's error, the
	// lost attempts, or the votes that reached no quorum (the digests
	// seen and which peers voted for each). Empty unless State is failed.
	Error string `json:"error,omitempty"`
	// Digest is the SHA-256 of the accepted output's canonical listing.
	Digest string `json:"digest,omitempty"`
	// Files are the task's output files, relative to the output folder.
	Files []string `json:"files,omitempty"`
	// Votes are the digests the task's replicas reported (redundant
	// execution), and Verdict how they were decided.
	Votes   []Vote `json:"votes,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Checkpoints counts the checkpoints the task saved.
	Checkpoints int `json:"checkpoints,omitempty"`
	// Partials are the task's last partial results, oldest first.
	Partials []Partial `json:"partials,omitempty"`
	// Reused: the last run did not run the task; its result and its
	// record (attempts, peer, votes) are an earlier run's, kept because
	// its key and its output were unchanged.
	Reused bool `json:"reused,omitempty"`
	// Key is the task's key (job.TaskKey: the digest of its plugin,
	// params and inputs), zero when unknown; kept in the job database,
	// not in report.json.
	Key [32]byte `json:"-"`
}

// Vote is one replica's answer.
type Vote struct {
	Peer   string `json:"peer"`
	PeerID string `json:"peer_id,omitempty"`
	Digest string `json:"digest"`
}

// Exclusion names a peer the job stopped trusting.
type Exclusion struct {
	Peer   string    `json:"peer"`
	PeerID string    `json:"peer_id,omitempty"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// SpotChecks counts the submitter's re-runs of accepted results and
// lists the ones that caught a wrong result.
type SpotChecks struct {
	Fraction float64 `json:"fraction"`
	// Checked re-runs finished; Caught lists those that disagreed with
	// the accepted result (the trusted result replaced it).
	Checked int         `json:"checked"`
	Caught  []SpotCatch `json:"caught,omitempty"`
	// Reinstated are peers excluded for votes they lost to peers a spot
	// check then caught: they take work again.
	Reinstated []string `json:"reinstated,omitempty"`
}

// SpotCatch is a spot check that disagreed with the accepted result: the
// peers that voted for the wrong digest were excluded.
type SpotCatch struct {
	Task     string    `json:"task"`
	Peers    []string  `json:"peers"`
	Accepted string    `json:"accepted"`
	Trusted  string    `json:"trusted"`
	Time     time.Time `json:"time"`
}

// PeerTrust is the record of a peer's answers in a verified job.
type PeerTrust struct {
	Peer     string `json:"peer"`
	PeerID   string `json:"peer_id,omitempty"`
	Valid    int    `json:"valid"`
	Invalid  int    `json:"invalid"`
	Excluded bool   `json:"excluded,omitempty"`
}

// Partial is a partial result a task emitted while it ran.
type Partial struct {
	Time   time.Time `json:"time"`
	Peer   string    `json:"peer"`
	PeerID string    `json:"peer_id,omitempty"`
	// Text holds UTF-8 data; Bytes (base64 in JSON) anything else.
	Text      string `json:"text,omitempty"`
	Bytes     []byte `json:"bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Attempt is one try of a task on one peer.
type Attempt struct {
	Peer    string    `json:"peer"`
	PeerID  string    `json:"peer_id,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
	// Device is the device the peer's slot bound for the attempt (a GPU
	// slot's GPU, "GPU 0: NVIDIA H200, ..."); empty for a CPU slot.
	Device string `json:"device,omitempty"`
	// Resumed: the attempt started from the task's latest checkpoint.
	Resumed bool `json:"resumed,omitempty"`
	// Check: a trusted run on the submitter's own slot (a spot check, or
	// the re-verification of what a caught peer voted for).
	Check bool `json:"check,omitempty"`
	// HandedOver: the peer finished the attempt while the job's
	// coordinator was gone (or sent it just before it went) and handed
	// the result over to the rerun; start and end are the attempt's own.
	HandedOver bool `json:"handed_over,omitempty"`
}

// Write stores r as dir/report.json atomically: a temp file, fsync,
// rename, fsync of the folder. A reader never sees half a report.
func Write(dir string, r *Report) error {
	return WriteAtomic(filepath.Join(dir, FileName), 0o644, func(w io.Writer) error { return Encode(w, r) })
}

// WriteEach stores as dir/report.json, atomically like Write, the report
// whose job-level fields are head's and whose tasks each yields
// (EncodeEach).
func WriteEach(dir string, head *Report, each func(yield func(*Task) error) error) error {
	return WriteAtomic(filepath.Join(dir, FileName), 0o644, func(w io.Writer) error { return EncodeEach(w, head, each) })
}

// Encode writes r as report.json holds it: json.MarshalIndent(r, "", "  ")
// and a newline, byte for byte, but a task at a time, so that a report of
// a million tasks is never in memory as one document. Like Write, it
// names peers by name and ID (splitting "name@ID" keys).
func Encode(w io.Writer, r *Report) error {
	if r.Tasks == nil {
		r.SplitPeerIDs()
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		_, err = w.Write(append(data, '\n'))
		return err
	}
	return EncodeEach(w, r, func(yield func(*Task) error) error {
		for i := range r.Tasks {
			if err := yield(&r.Tasks[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// EncodeEach writes the report whose job-level fields are head's (its
// Tasks are ignored) and whose tasks each yields, in order, as Encode
// writes a report that holds them: one task in memory at a time (each
// may reuse the task it yields).
func EncodeEach(w io.Writer, head *Report, each func(yield func(*Task) error) error) error {
	var b []byte
	return EncodeRaw(w, head, func(yield func(raw []byte) error) error {
		return each(func(t *Task) error {
			var err error
			if b, err = AppendTask(b[:0], t); err != nil {
				return err
			}
			return yield(b)
		})
	})
}

// EncodeRaw is EncodeEach for tasks already encoded: each yields every
// task as AppendTask encodes it (raw is read before yield returns).
func EncodeRaw(w io.Writer, head *Report, each func(yield func(raw []byte) error) error) error {
	h := *head
	h.Tasks = []Task{}
	h.SplitPeerIDs()
	data, err := json.MarshalIndent(&h, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	const empty = "[]\n}" // "tasks" is the last field
	if !bytes.HasSuffix(data, []byte(empty)) {
		return fmt.Errorf("encode report: unexpected layout")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	err = each(func(raw []byte) error {
		if n == 0 {
			bw.Write(data[:len(data)-len(empty)])
			bw.WriteString("[\n")
		} else {
			bw.WriteString(",\n")
		}
		n++
		bw.WriteString(taskPrefix)
		_, err := bw.Write(raw)
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		bw.Write(data)
		bw.WriteString("\n")
		return bw.Flush()
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}

// Read loads dir/report.json. A missing report gives an error that
// satisfies errors.Is(err, fs.ErrNotExist).
func Read(dir string) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode report %s: %w", filepath.Join(dir, FileName), err)
	}
	if r.Format > Format {
		return nil, fmt.Errorf("decode report %s: format %d is newer than this p2pc (%d)", filepath.Join(dir, FileName), r.Format, Format)
	}
	return &r, nil
}

// Pending is a report.json written and synced under a temporary name in
// its folder, not in place yet: Commit puts it in place, Abort removes
// it. A reader never sees it half written.
type Pending struct {
	tmp, path string
}

// PrepareRaw writes the report EncodeRaw writes into a temporary file in
// dir and syncs it; Commit makes it dir/report.json.
func PrepareRaw(dir string, head *Report, each func(yield func(raw []byte) error) error) (*Pending, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.CreateTemp(dir, "."+FileName+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	err = EncodeRaw(f, head, each)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Pending{tmp: f.Name(), path: path}, nil
}

// Commit renames the report into place and syncs its folder.
func (p *Pending) Commit() error {
	if err := os.Rename(p.tmp, p.path); err != nil {
		os.Remove(p.tmp)
		return fmt.Errorf("write %s: %w", p.path, err)
	}
	return SyncDir(filepath.Dir(p.path))
}

// Abort removes the report not committed.
func (p *Pending) Abort() { os.Remove(p.tmp) }

// WriteFileAtomic writes data to path through a temp file in the same
// folder, fsyncs it, renames it into place and fsyncs the folder.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic with the content written by write: a
// failure (a full disk) removes the temp file and leaves path as it was.
// Its errors name path, not the temp file.
func WriteAtomic(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	fail := func(err error) error {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == f.Name() {
			err = pe.Err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = write(f); err != nil {
		return fail(err)
	}
	if err = f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err = f.Sync(); err != nil {
		return fail(err)
	}
	if err = f.Close(); err != nil {
		return fail(err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a folder so that renames inside it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// TaskFiles names a task's output files as Task.Files does: relative to
// the output folder, with slashes ("tasks/<id>/<name>").
func TaskFiles(id string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.ToSlash(filepath.Join("tasks", id, n))
	}
	return out
}

// SplitPeer splits a coordinator's peer key, "name@NODEID" with the node
// ID its handshake proved (see package job), into the name and the ID. A
// key without an ID (the submitter's own slots) is all name.
func SplitPeer(key string) (name, id string) {
	i := strings.LastIndexByte(key, '@')
	if i < 0 || len(key)-i-1 != 34 || strings.Count(key[i+1:], "-") != 6 {
		return key, ""
	}
	return key[:i], key[i+1:]
}

// SplitPeerIDs moves the node IDs out of the peer fields into PeerID, so
// that report.json names a peer by its name beside its ID. It is
// idempotent.
func (r *Report) SplitPeerIDs() {
	split := func(peer, id *string) {
		if n, i := SplitPeer(*peer); i != "" {
			*peer, *id = n, i
		}
	}
	for i := range r.Excluded {
		split(&r.Excluded[i].Peer, &r.Excluded[i].PeerID)
	}
	for i := range r.Peers {
		split(&r.Peers[i].Peer, &r.Peers[i].PeerID)
	}
	for i := range r.Tasks {
		r.Tasks[i].splitPeerIDs()
	}
}

// splitPeerIDs is SplitPeerIDs for one task.
func (t *Task) splitPeerIDs() {
	split := func(peer, id *string) {
		if n, i := SplitPeer(*peer); i != "" {
			*peer, *id = n, i
		}
	}
	split(&t.Peer, &t.PeerID)
	for j := range t.Attempts {
		split(&t.Attempts[j].Peer, &t.Attempts[j].PeerID)
	}
	for j := range t.Votes {
		split(&t.Votes[j].Peer, &t.Votes[j].PeerID)
	}
	for j := range t.Partials {
		split(&t.Partials[j].Peer, &t.Partials[j].PeerID)
	}
}
