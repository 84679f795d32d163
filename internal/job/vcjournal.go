package job

import (
	"context"

	"github.com/p2pc/p2pc/internal/job/vc"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// vcJournal keeps the virtual computer's changes in the job database,
// in the same group commit as the tasks' records. A write that fails is
// the database's sticky error, which ends the run (run.go).
type vcJournal struct{ db *jobdb.DB }

var _ vc.Journal = vcJournal{}

func (j vcJournal) Global(key string, g sdk.Global) { j.db.PutVCGlobal(key, g.Version, g.Value) }

func (j vcJournal) Message(to string, m sdk.Message) {
	j.db.PutVCMessage(to, jobdb.VCMessage{Seq: m.Seq, Sender: m.From, Data: m.Data})
}

func (j vcJournal) Checkpoint(task string, c vc.Saved) {
	j.db.PutVCCheckpoint(task, jobdb.VCCheckpoint{Seq: c.Seq, Pos: c.Pos, Time: c.At, Block: c.Block, State: c.State})
}

func (j vcJournal) Op(task string, n int, o vc.Op) {
	j.db.PutVCOp(task, n, jobdb.VCOp{Op: o.Op, Key: o.Key, OK: o.OK, Version: o.Global.Version, Value: o.Global.Value, Error: o.Err})
}

func (j vcJournal) TruncateOps(task string, n int) { j.db.TruncateVCOps(task, n) }

// restoreVC puts back the virtual computer's state an earlier run of the
// job kept in its database, then journals every later change.
func (r *runner) restoreVC(ctx context.Context) error {
	if r.p.Previous != nil {
		kept, err := r.db.ReadVC(ctx)
		if err != nil {
			return err
		}
		s := vc.Snapshot{Globals: map[string]sdk.Global{}, Messages: map[string][]sdk.Message{},
			Checkpoints: map[string]vc.Saved{}, Ops: map[string]map[int]vc.Op{}}
		for k, g := range kept.Globals {
			s.Globals[k] = sdk.Global{Version: g.Version, Value: g.Value}
		}
		for task, ms := range kept.Messages {
			for _, m := range ms {
				s.Messages[task] = append(s.Messages[task], sdk.Message{From: m.Sender, Data: m.Data, Seq: m.Seq})
			}
		}
		for task, c := range kept.Checkpoints {
			s.Checkpoints[task] = vc.Saved{State: c.State, Seq: c.Seq, Pos: c.Pos, At: c.Time, Block: c.Block}
		}
		for task, ops := range kept.Ops {
			m := make(map[int]vc.Op, len(ops))
			for n, o := range ops {
				m[n] = vc.Op{Op: o.Op, Key: o.Key, OK: o.OK, Global: sdk.Global{Version: o.Version, Value: o.Value}, Err: o.Error}
			}
			s.Ops[task] = m
		}
		if g, m, c := r.vc.Restore(s); g+m+c > 0 {
			r.log.Info("shared state of the earlier run restored", "globals", g, "messages", m, "checkpoints", c)
		}
	}
	r.vc.SetJournal(vcJournal{r.db})
	return nil
}
