package planner

import (
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

// Processing time. PROCTIME() in a select list or computed column makes
// its column the processing-time attribute of the node's output, as
// Rowtime names the event-time one. Its values are the wall clock when
// the Calc evaluates the row; what recognises the attribute (a lookup
// join's FOR SYSTEM_TIME AS OF, a processing-time window) reads its own
// clock instead.

// proctimeOf returns the output column of n that is the processing-time
// attribute, or -1.
func proctimeOf(n Node) int {
	switch n := n.(type) {
	case *Calc:
		return n.procAttr - 1
	case *WatermarkAssigner:
		return proctimeOf(n.Input)
	case *LookupJoin:
		// The probe side's columns come first.
		return proctimeOf(n.Input)
	}
	return -1
}

// isProctimeCall reports a call of PROCTIME().
func isProctimeCall(e ast.Expr) bool {
	c, ok := e.(*ast.Call)
	return ok && len(c.Name.Parts) == 1 && strings.EqualFold(c.Name.Parts[0], "PROCTIME") && len(c.Args) == 0 && c.Over == nil
}

// procWindowCheck refuses the processing-time windows clink does not
// run: only TUMBLE follows the wall clock.
func procWindowCheck(proc bool, fname string, pos ast.Pos) error {
	if proc && WindowKind(fname) != Tumble {
		return errorf(pos, "processing-time windows are supported for TUMBLE only, not %s; declare a WATERMARK and use an event-time attribute", fname)
	}
	return nil
}
