package job

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/spec"
)

// TestJobIDFormula pins the job ID: SHA-256 of "p2pc-job-v1\n", the
// canonical spec, then a line per plugin and input digest in hex. A
// change here changes every job's ID (and output folders' ownership).
func TestJobIDFormula(t *testing.T) {
	job := &spec.Job{Name: "demo"}
	plugin := digest.Sum([]byte("plugin"))
	in := Input{Name: "a.txt", Digest: digest.Sum([]byte("a"))}
	text := "p2pc-job-v1\n" + string(job.Canonical()) +
		"\nplugin " + hex.EncodeToString(plugin[:]) + "\n" +
		`input "a.txt" ` + hex.EncodeToString(in.Digest[:]) + "\n"
	want := sha256.Sum256([]byte(text))
	if got := JobID(job, plugin, []Input{in}); got != want {
		t.Errorf("JobID = %s, want %x", got, want)
	}
	if JobID(job, plugin, nil) == JobID(job, digest.Sum([]byte("other")), nil) {
		t.Error("the plugin digest does not change the job ID")
	}
}
