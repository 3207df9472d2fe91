// Package expr type-checks and compiles SQL scalar expressions, and
// provides the aggregate accumulators, with Flink's semantics.
//
// Compile turns an ast.Expr into a Compiled: a result type and a tree of
// closures over a row ([]types.Value). Column references are resolved by a
// Scope (Tables for the usual one-or-more-tables case); an unknown or
// ambiguous name is an error with its position and the closest
// candidates. Evaluation allocates nothing for scalar expressions unless
// they build a new string, a DECIMAL beyond int64, or call a user function.
//
// Semantics, following Flink where Flink documents them:
//
//   - Types: integers widen to the wider integer; integer with DECIMAL is
//     DECIMAL with Flink's precision/scale formulas (capped at 38, keeping
//     at least scale 6); anything with DOUBLE is DOUBLE. `7 / 2` is 3 (INT).
//     Literals: 42 is INT NOT NULL, 0.908 DECIMAL(3, 3), 1E3 DOUBLE, 'ab'
//     CHAR(2). Types that cannot meet are errors naming both ("cannot
//     compare STRING and INT at line 3, column 9"); a string literal meets
//     a DATE/TIME/TIMESTAMP as that type.
//   - NULL: AND, OR and NOT use three-valued logic; arithmetic,
//     comparisons and functions give NULL for a NULL argument, except IS
//     [NOT] NULL/TRUE/FALSE/UNKNOWN, IS [NOT] DISTINCT FROM, COALESCE,
//     IFNULL, IF, CASE, NULLIF (second argument) and CONCAT_WS (which skips
//     NULL strings). x IN (..., NULL) is NULL when nothing matches.
//   - Errors at run time: integer and DECIMAL division or modulo by zero
//     fail, as Flink throws ArithmeticException; CAST of unparsable text
//     fails (TRY_CAST gives NULL). Integer overflow wraps as Java's int and
//     long do; DOUBLE follows IEEE 754 (1.0/0 is Infinity); a DECIMAL that
//     does not fit its precision becomes NULL (as in Flink, even when the
//     type says NOT NULL).
//   - CAST follows Flink 1.15+: to BOOLEAN from 'true'/'t'/'yes'/'y'/'1'
//     and their negatives; string to integer drops a fractional part;
//     CHAR(n) pads and VARCHAR(n) truncates; numbers print as Java does;
//     BIGINT to TIMESTAMP is refused (use TO_TIMESTAMP_LTZ).
//   - Time: TIMESTAMP is a wall-clock reading, TIMESTAMP_LTZ an instant
//     shown and converted in the session time zone (Compiler.Location,
//     default UTC). DATE_FORMAT and TO_TIMESTAMP take Java date patterns
//     (yyyy MM dd HH mm ss SSS E a ...). EXTRACT follows Calcite (DOW 1 =
//     Sunday; MILLISECOND includes the seconds). FLOOR(ts TO WEEK) starts
//     weeks on Monday.
//   - CASE/COALESCE of CHAR literals of different lengths give VARCHAR of
//     the longest, without Flink's padding of the shorter ones.
//
// Aggregates (NewAggregate): COUNT(*), COUNT([DISTINCT] x), SUM, SUM0, AVG,
// MIN, MAX, with Add, Retract, Merge, Result and a binary codec for keyed
// state.
//
// Callers' duties:
//
//  1. Pass rows laid out as the Scope says; Eval indexes them without
//     checks.
//  2. Apply FILTER (WHERE ...) of aggregates before Add/Retract, and ask
//     for retracting MIN/MAX (AggSpec.Retract) on updating input.
//  3. Treat Compiled.Deterministic == false (CURRENT_TIMESTAMP, NOW(),
//     non-deterministic user functions) as processing-time dependent: do
//     not fold it or expect two evaluations to agree.
//  4. Register user functions (Registry.RegisterScalar) before compiling
//     the statements that call them.
package expr
