package jobdb

import (
	"context"
	"fmt"
)

// Snapshot writes a consistent copy of the database as committed so far
// into dst, a file that must not exist (SQLite's VACUUM INTO): what a
// job's successors keep to resume it (docs/protocol.md, swarm jobs). It
// goes through the writer's connection, between its batches.
func (db *DB) Snapshot(ctx context.Context, dst string) error {
	if _, err := db.sql.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("snapshot job database %s: %w", db.path, err)
	}
	return nil
}
