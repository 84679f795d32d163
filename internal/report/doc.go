// Package report defines report.json, the stable machine-readable record
// of a job run that scripts consume, and writes it atomically.
//
// The format is versioned by the Format field. Fields are only ever
// added; a reader must ignore fields it does not know. docs/report.md
// documents every field.
package report
