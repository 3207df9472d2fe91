// Package ast holds the syntax tree of clink's SQL dialect (Flink SQL) and
// its canonical printer.
//
// The tree is what sql/parser produces and what the binder consumes. It is
// purely syntactic: names are not resolved, types are not checked, and a node
// may be accepted here that the binder later refuses (a DESCRIPTOR argument
// outside a window function, a grouping set outside GROUP BY).
//
// Every node embeds a Pos (line, column, byte offset of its first token), so
// later stages can report errors at the place the user wrote the construct.
//
// Every node's String method prints canonical SQL: keywords upper case, one
// space between tokens, identifiers back-quoted only where needed, the
// minimum of parentheses that keeps the tree's shape, and the canonical
// spelling of synonyms (INTEGER prints as INT, != as <>, the function form of
// SUBSTRING as the FROM/FOR form). Parsing the printed text yields the same
// tree up to positions; the parser's tests and fuzz target check this. Plan
// tests and EXPLAIN rely on the printed form being stable.
//
// Callers' duties:
//
//  1. Treat a tree as immutable once the parser has returned it; later
//     stages build their own structures instead of rewriting nodes.
//  2. Compare trees with Equal (which ignores positions), not with ==.
package ast
