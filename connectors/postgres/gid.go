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
// open when they are not among its restored handles:
//
//   - those of its own index in the current generation;
//   - on a restore, those of the subtasks it succeeds in the restored
//     generation, and the abandoned ones: a generation above the restored
//     one other than the current one (a rescale that crashed before any of
//     its checkpoints completed), or the current generation at an index
//     this run does not have (sub >= parallelism, left by an earlier
//     attempt at the same generation with more subtasks); each abandoned
//     gid falls to subtask sub mod parallelism, so exactly one subtask
//     rolls it back;
//   - on a fresh start, those of every generation at an index sub with
//     sub mod parallelism equal to its own;
//   - gids without a generation from the subtasks it succeeds, or on a
//     fresh start at an index sub with sub mod parallelism equal to its own.
type responsibility struct {
	gen, prevGen int
	sub          int
	parallelism  int
	succeeds     []int
}

// dealt reports whether an index of an abandoned transaction falls to this
// subtask.
func (r responsibility) dealt(sub int) bool {
	if r.parallelism <= 0 {
		return sub == r.sub
	}
	return sub%r.parallelism == r.sub
}

func (r responsibility) owns(p gidParts) bool {
	fresh := r.prevGen < 0
	if !p.hasGen {
		return slices.Contains(r.succeeds, p.sub) || (fresh && r.dealt(p.sub))
	}
	switch {
	case p.gen == r.gen && p.sub == r.sub:
		return true
	case fresh:
		return r.dealt(p.sub)
	case p.gen == r.prevGen && p.gen != r.gen:
		return slices.Contains(r.succeeds, p.sub)
	case p.gen == r.gen:
		// Current generation, another index: a sibling's, unless this run
		// has no such index. (When the current generation is the restored
		// one, the siblings' indexes are the old subtasks' too, and their
		// own successors handle them.)
		if p.sub < r.parallelism {
			return p.gen == r.prevGen && slices.Contains(r.succeeds, p.sub)
		}
		return r.dealt(p.sub)
	case p.gen > r.prevGen:
		return r.dealt(p.sub) // an abandoned generation
	}
	return false
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
