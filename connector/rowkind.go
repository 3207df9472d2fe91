package connector

import "github.com/clinkstream/clink/connector/changelog"

// RowKind is the change a changelog row carries (see package changelog).
type RowKind = changelog.RowKind

// The row kinds, as Flink names them.
const (
	Insert       = changelog.Insert
	UpdateBefore = changelog.UpdateBefore
	UpdateAfter  = changelog.UpdateAfter
	Delete       = changelog.Delete
)
