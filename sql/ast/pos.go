package ast

import "fmt"

// Pos is a position in the SQL source: 1-based line and column (counted in
// characters, a tab counts as one) and the 0-based byte offset.
type Pos struct {
	Line   int
	Col    int
	Offset int
}

// Position returns p. Nodes embed Pos, so every node has this method.
func (p Pos) Position() Pos { return p }

// String formats p as "line L, column C", the form error messages use.
func (p Pos) String() string { return fmt.Sprintf("line %d, column %d", p.Line, p.Col) }

// IsValid reports whether p was set by the parser.
func (p Pos) IsValid() bool { return p.Line > 0 }
