package benchmarks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// BenchmarkDispatchPhases: where one task's time goes on 1 peer x 1 slot
// (issue 16's unloaded single task), phase by phase (internal/phasetrace:
// the coordinator's lease and send, the peer's receive, queue, slot and
// plugin call, the result's way back and its settling). Three jobs take
// turns in every iteration, so the machine's load drifts alike over
// them: a job of one task (nothing queued anywhere), 200 tasks one at a
// time (batch: off; the peer's prefetch queues one behind the running
// one) and 200 tasks batched as by default (a task waits behind its
// batch's earlier ones). It logs each step's p10 / p50 / p90 in
// microseconds and reports each job's lease-to-end p50.
func BenchmarkDispatchPhases(b *testing.B) {
	heavy(b)
	bin, echo := binaries(b)
	dir := b.TempDir()
	peerTrace := filepath.Join(dir, "peer.trace")
	b.Setenv("P2PC_PHASE_TRACE", peerTrace)
	addrs := swarm(b, bin, 1, 1)
	data := b.TempDir()
	jobs := []struct {
		name, spec, trace string
	}{
		{name: "lone", spec: echoSpec(b, echo, 1, 0)},
		{name: "off", spec: batchOff(b, echoSpec(b, echo, 200, 0))},
		{name: "batched", spec: echoSpec(b, echo, 200, 0)},
	}
	for i := range jobs {
		jobs[i].trace = filepath.Join(dir, jobs[i].name+".trace")
		os.Unsetenv("P2PC_PHASE_TRACE") // warm-ups are not traced
		submit(b, bin, jobs[i].spec, addrs, data)
		submit(b, bin, jobs[i].spec, addrs, data)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, j := range jobs {
			os.Setenv("P2PC_PHASE_TRACE", j.trace) // this job's coordinator
			submit(b, bin, j.spec, addrs, data)
		}
	}
	b.StopTimer()
	var sb strings.Builder
	for _, j := range jobs {
		recs, err := harness.ReadPhaseTrace(j.trace, peerTrace)
		if err != nil {
			b.Fatal(err)
		}
		steps := harness.PhaseSteps(recs)
		fmt.Fprintf(&sb, "\n%s (%d leases)\n", j.name, len(recs))
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		for _, s := range steps {
			fmt.Fprintf(&sb, "  %-9s -> %-9s  p10 %7.1f  p50 %7.1f  p90 %7.1f us\n", s.From, s.To, us(s.P10), us(s.P50), us(s.P90))
		}
		b.ReportMetric(us(steps[len(steps)-2].P50), j.name+"-lease-to-end-p50-us")
	}
	b.Log(sb.String())
}
