// Package types is the SQL type system of clink and its runtime values.
//
// A Type is a Flink SQL data type (kind, nullability, length, precision,
// scale, element and field types), built from the parser's ast.DataType by
// FromAST and printed in Flink's spelling (`BIGINT NOT NULL`,
// `DECIMAL(10, 2)`, `TIMESTAMP_LTZ(3)`, `STRING`).
//
// A Value is one SQL value in 24 bytes that holds every scalar without a
// heap allocation (see Value for the layout): the Nexmark target of 400K
// events per second per core leaves no room for boxing each column.
// DECIMAL(p, s) keeps an int64 unscaled value whenever the value fits one
// (always for p <= 18) and falls back to math/big beyond. TIMESTAMP and
// TIMESTAMP_LTZ keep milliseconds since the epoch plus nanoseconds of the
// millisecond, like Flink's TimestampData.
//
// A Row is a changelog row (changelog.RowKind plus values) with a compact,
// deterministic binary codec (encoding.BinaryMarshaler,
// BinaryUnmarshaler and BinaryAppender), so state.CodecFor[types.Row] stores
// rows in keyed state and checkpoints; the same encoding of a value is its
// key encoding (AppendKey).
//
// Callers' duties:
//
//  1. Handle NULL before calling Compare or the accessors; Equal treats two
//     NULLs as equal (IS NOT DISTINCT FROM, grouping keys).
//  2. Keep a value's kind consistent with its column's Type: the value
//     carries its kind, precision and scale so that it can be printed,
//     compared and encoded on its own, but nothing re-checks it against the
//     schema.
//  3. Treat values as immutable: String and the composite constructors do
//     not copy their arguments.
package types
