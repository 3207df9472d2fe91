package postgres

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/checkpoint"
)

// maxGIDLen is the longest transaction id the server accepts (its GIDSIZE
// less the terminating zero byte).
const maxGIDLen = 199

// gidPrefix starts every transaction id of sink uid.
func gidPrefix(uid string) string { return "clink_" + uid + "_" }

// formatGID names the transaction that subtask sub of generation gen
// prepares for checkpoint ckpt: clink_<uid>_g<gen>_sub<sub>_<ckpt>.
func formatGID(uid string, gen, sub int, ckpt checkpoint.ID) string {
	return fmt.Sprintf("%sg%d_sub%d_%d", gidPrefix(uid), gen, sub, ckpt)
}

// gidParts is a parsed transaction id. A gid written before generations
// existed (clink_<uid>_sub<N>_<ckpt>) has hasGen false.
type gidParts struct {
	hasGen bool
	gen    int
	sub    int
	ckpt   checkpoint.ID
}

// parseGID parses a transaction id of sink uid; ok is false for any other
// name.
func parseGID(uid, gid string) (p gidParts, ok bool) {
	rest, found := strings.CutPrefix(gid, gidPrefix(uid))
	if !found {
		return p, false
	}
	if g, after, found := strings.Cut(rest, "_"); found && strings.HasPrefix(g, "g") {
		n, ok := parseNat(g[1:])
		if !ok {
			return p, false
		}
		p.hasGen, p.gen, rest = true, n, after
	}
	s, c, found := strings.Cut(rest, "_")
	if !found || !strings.HasPrefix(s, "sub") {
		return p, false
	}
	sub, ok1 := parseNat(s[3:])
	ckpt, ok2 := parseNat(c)
	if !ok1 || !ok2 {
		return p, false
	}
	p.sub, p.ckpt = sub, checkpoint.ID(ckpt)
	return p, true
}

// parseNat parses a decimal number without sign or leading zeros, so that
// a parsed gid formats back to itself.
func parseNat(s string) (int, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// responsibility says which prepared transactions a subtask rolls back at
// open when they are not among its restored handles: those of the subtasks
// it succeeds in the restored generation, those of its own index in the
// current generation, and gids without a generation from the subtasks it
// succeeds (or from its own index on a fresh start).
type responsibility struct {
	gen, prevGen int
	sub          int
	succeeds     []int
}

func (r responsibility) owns(p gidParts) bool {
	if !p.hasGen {
		return slices.Contains(r.succeeds, p.sub) || (r.prevGen < 0 && p.sub == r.sub)
	}
	if p.gen == r.gen && p.sub == r.sub {
		return true
	}
	return r.prevGen >= 0 && p.gen == r.prevGen && slices.Contains(r.succeeds, p.sub)
}

// quoteLiteral returns s as an SQL string literal. COMMIT PREPARED and its
// kin take no parameters, so the gid (which holds the user's uid) is
// quoted here.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		q = "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}
