package jobdb

import (
	"context"
	"strings"
)

// TreeRow is a task's place in a fork tree, as the round of a job whose
// tasks spawn that ran it records it (table tree).
type TreeRow struct {
	Task   string
	Parent string // "" for a task of the spec
	Depth  int
	// Children are the IDs of the children the task spawned so far; with
	// Suspended the task waits for them (it ends in a later round).
	Children  []string
	Suspended bool
}

const (
	qPutTree = "INSERT OR REPLACE INTO tree(task, parent, depth, children, suspended) VALUES (?, ?, ?, ?, ?)"
)

// PutTree queues the tree rows of a round's tasks.
func (db *DB) PutTree(rows []TreeRow) error {
	return db.w.put(change{apply: func(tx *batch) error {
		for _, r := range rows {
			if err := tx.exec(qPutTree, r.Task, r.Parent, r.Depth, strings.Join(r.Children, " "), r.Suspended); err != nil {
				return err
			}
		}
		return nil
	}})
}

// Tree reads the tree rows, by task ID; a database of a job that does not
// spawn has none.
func (db *DB) Tree(ctx context.Context) ([]TreeRow, error) {
	rows, err := db.sql.QueryContext(ctx, "SELECT task, parent, depth, children, suspended FROM tree ORDER BY task")
	if err != nil {
		if isNoTable(err) {
			return nil, nil
		}
		return nil, db.wrap("read tree", err)
	}
	defer rows.Close()
	var out []TreeRow
	for rows.Next() {
		var r TreeRow
		var children string
		if err := rows.Scan(&r.Task, &r.Parent, &r.Depth, &children, &r.Suspended); err != nil {
			return nil, db.wrap("read tree", err)
		}
		r.Children = strings.Fields(children)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap("read tree", err)
	}
	return out, nil
}
