package jobdb

// PutJobValueFunc queues one row of the table job whose value is taken
// when its batch commits: value runs on the writer's goroutine, once per
// batch however many changes of key the batch holds. The row's place in
// the journal is where it was queued: a change queued after it commits
// in the same transaction or a later one. value must not wait for
// anything that waits for the writer.
func (db *DB) PutJobValueFunc(key string, value func() string) error {
	return db.w.put(change{key: changeKey{kind: keyJobValue, name: key}, apply: func(tx *batch) error {
		return tx.exec(qJob, key, value())
	}})
}
