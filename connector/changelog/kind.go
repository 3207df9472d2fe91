// Package changelog defines the kinds of change a changelog row carries.
// It imports nothing, so that every layer (connectors, SQL values) can
// share it.
package changelog

import "fmt"

// RowKind is the change a changelog row carries, as Flink names them.
type RowKind uint8

const (
	// Insert (+I) adds a row.
	Insert RowKind = iota
	// UpdateBefore (-U) retracts the previous version of an updated row.
	UpdateBefore
	// UpdateAfter (+U) is the new version of an updated row.
	UpdateAfter
	// Delete (-D) removes a row.
	Delete
)

// String returns +I, -U, +U or -D.
func (k RowKind) String() string {
	switch k {
	case Insert:
		return "+I"
	case UpdateBefore:
		return "-U"
	case UpdateAfter:
		return "+U"
	case Delete:
		return "-D"
	}
	return fmt.Sprintf("RowKind(%d)", uint8(k))
}

// IsAccumulate reports whether the row adds (+I, +U) rather than retracts
// (-U, -D).
func (k RowKind) IsAccumulate() bool { return k == Insert || k == UpdateAfter }
