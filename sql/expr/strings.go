package expr

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

func strType(nullable bool) types.Type { return nullableIf(types.StringType, nullable) }

func wantStrings(pos ast.Pos, name string, args ...*node) error {
	for _, a := range args {
		if err := wantKind(pos, name, a, "a character string", isStr); err != nil {
			return err
		}
	}
	return nil
}

func wantInts(pos ast.Pos, name string, args ...*node) error {
	for _, a := range args {
		if err := wantKind(pos, name, a, "an integer", isInt); err != nil {
			return err
		}
	}
	return nil
}

func upperLower(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	f := strings.ToUpper
	if name == "LOWER" {
		f = strings.ToLower
	}
	t := args[0].typ
	if t.Kind == types.KindNull {
		t = types.StringType
	}
	return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) { return types.String(f(v.Str())), nil }), nil
}

func charLength(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	return strict1(nullableIf(types.IntType, anyNullable(args...)), pos, args[0], func(v types.Value) (types.Value, error) {
		return types.Int32(int32(utf8.RuneCountInString(v.Str()))), nil
	}), nil
}

func substrFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 3); err != nil {
		return nil, err
	}
	return c.substring(pos, args)
}

// substring is SUBSTRING(s FROM start [FOR len]) with Flink's rules:
// positions count characters from 1; a negative start counts from the end;
// 0 is the first character; a negative length gives the empty string.
func (c *compiler) substring(pos ast.Pos, args []*node) (*node, error) {
	if err := wantStrings(pos, "SUBSTRING", args[0]); err != nil {
		return nil, err
	}
	if err := wantInts(pos, "SUBSTRING", args[1:]...); err != nil {
		return nil, err
	}
	t := types.VarCharOf(max(1, args[0].typ.Length))
	if args[0].typ.Kind == types.KindNull {
		t = types.StringType
	}
	sub := func(s string, start, length int64) types.Value {
		if length < 0 {
			return types.String("")
		}
		n := int64(utf8.RuneCountInString(s))
		var from int64
		switch {
		case start > 0:
			from = start - 1
			if from >= n {
				return types.String("")
			}
		case start < 0:
			from = n + start
			if from < 0 {
				return types.String("")
			}
		}
		to := n
		if n-from >= length {
			to = from + length
		}
		return types.String(runeSlice(s, from, to))
	}
	if len(args) == 2 {
		return strict2(t.WithNotNull(!anyNullable(args...)), pos, args[0], args[1], func(s, st types.Value) (types.Value, error) {
			return sub(s.Str(), st.Int64(), 1<<62), nil
		}), nil
	}
	return strict3(t.WithNotNull(!anyNullable(args...)), pos, args[0], args[1], args[2], func(s, st, l types.Value) (types.Value, error) {
		return sub(s.Str(), st.Int64(), l.Int64()), nil
	}), nil
}

// runeSlice returns the characters [from, to) of s.
func runeSlice(s string, from, to int64) string {
	if from >= to {
		return ""
	}
	var i int64
	start, end := len(s), len(s)
	for b := range s {
		if i == from {
			start = b
		}
		if i == to {
			end = b
			break
		}
		i++
	}
	if start > end {
		return ""
	}
	return s[start:end]
}

// position is POSITION(needle IN haystack): the 1-based character index of
// the first occurrence, 0 when absent.
func (c *compiler) position(pos ast.Pos, args []*node) (*node, error) {
	if err := wantStrings(pos, "POSITION", args...); err != nil {
		return nil, err
	}
	return strict2(nullableIf(types.IntType, anyNullable(args...)), pos, args[0], args[1], func(n, h types.Value) (types.Value, error) {
		return types.Int32(int32(runeIndex(h.Str(), n.Str(), 0))), nil
	}), nil
}

// runeIndex returns the 1-based character position of needle in hay at or
// after character from (0-based), or 0.
func runeIndex(hay, needle string, from int) int {
	off := 0
	for i := 0; i < from && off < len(hay); i++ {
		_, sz := utf8.DecodeRuneInString(hay[off:])
		off += sz
	}
	if from > 0 && off >= len(hay) && needle != "" {
		return 0
	}
	b := strings.Index(hay[off:], needle)
	if b < 0 {
		return 0
	}
	return from + utf8.RuneCountInString(hay[off:off+b]) + 1
}

func locateFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[:2]...); err != nil {
		return nil, err
	}
	if len(args) == 2 {
		return c.position(pos, args)
	}
	if err := wantInts(pos, name, args[2]); err != nil {
		return nil, err
	}
	return strict3(nullableIf(types.IntType, anyNullable(args...)), pos, args[0], args[1], args[2], func(n, h, st types.Value) (types.Value, error) {
		if st.Int64() < 1 {
			return types.Int32(0), nil
		}
		return types.Int32(int32(runeIndex(h.Str(), n.Str(), int(st.Int64()-1)))), nil
	}), nil
}

func concatFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1<<30); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	fns := evals(args)
	return derive(strType(anyNullable(args...)), pos, func(row []types.Value) (types.Value, error) {
		var b strings.Builder
		for _, f := range fns {
			v, err := f(row)
			if err != nil || v.IsNull() {
				return types.Null, err
			}
			b.WriteString(v.Str())
		}
		return types.String(b.String()), nil
	}, args...), nil
}

func evals(ns []*node) []evalFn {
	out := make([]evalFn, len(ns))
	for i, n := range ns {
		out[i] = n.eval
	}
	return out
}

// concatWS joins the non-NULL strings with the separator; a NULL separator
// gives NULL.
func concatWS(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 1<<30); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	sepFn, fns := args[0].eval, evals(args[1:])
	return derive(strType(args[0].typ.Nullable()), pos, func(row []types.Value) (types.Value, error) {
		sep, err := sepFn(row)
		if err != nil || sep.IsNull() {
			return types.Null, err
		}
		var b strings.Builder
		first := true
		for _, f := range fns {
			v, err := f(row)
			if err != nil {
				return types.Null, err
			}
			if v.IsNull() {
				continue
			}
			if !first {
				b.WriteString(sep.Str())
			}
			first = false
			b.WriteString(v.Str())
		}
		return types.String(b.String()), nil
	}, args...), nil
}

func trimSet(s, chars string, leading, trailing bool) string {
	in := func(r rune) bool { return strings.ContainsRune(chars, r) }
	if leading {
		s = strings.TrimLeftFunc(s, in)
	}
	if trailing {
		s = strings.TrimRightFunc(s, in)
	}
	return s
}

// trim is TRIM([BOTH|LEADING|TRAILING] [chars] FROM s): chars is a set of
// characters (a space by default).
func (c *compiler) trim(e *ast.Trim) (*node, error) {
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	args := []*node{x}
	if e.Chars != nil {
		ch, err := c.expr(e.Chars)
		if err != nil {
			return nil, err
		}
		args = append(args, ch)
	}
	if err := wantStrings(e.Pos, "TRIM", args...); err != nil {
		return nil, err
	}
	leading := e.Side != "TRAILING"
	trailing := e.Side != "LEADING"
	return trimNode(e.Pos, args, leading, trailing), nil
}

func trimNode(pos ast.Pos, args []*node, leading, trailing bool) *node {
	t := strType(anyNullable(args...))
	if len(args) == 1 {
		return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
			return types.String(trimSet(v.Str(), " ", leading, trailing)), nil
		})
	}
	return strict2(t, pos, args[0], args[1], func(v, ch types.Value) (types.Value, error) {
		return types.String(trimSet(v.Str(), ch.Str(), leading, trailing)), nil
	})
}

func ltrimRtrim(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	return trimNode(pos, args, name == "LTRIM", name == "RTRIM"), nil
}

func replaceFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	return strict3(strType(anyNullable(args...)), pos, args[0], args[1], args[2], func(s, from, to types.Value) (types.Value, error) {
		if from.Str() == "" {
			return s, nil
		}
		return types.String(strings.ReplaceAll(s.Str(), from.Str(), to.Str())), nil
	}), nil
}

// regexCache compiles a pattern once per call site when it is constant,
// and caches a few recent ones otherwise.
type regexCache struct {
	fixed *regexp.Regexp
	mu    sync.Mutex
	last  map[string]*regexp.Regexp
}

func newRegexCache(n *node) (*regexCache, error) {
	rc := &regexCache{last: map[string]*regexp.Regexp{}}
	if n.konst && !n.val.IsNull() {
		re, err := regexp.Compile(javaRegex(n.val.Str()))
		if err != nil {
			return nil, errorf(n.pos, "invalid regular expression '%s': %v", n.val.Str(), err)
		}
		rc.fixed = re
	}
	return rc, nil
}

func (rc *regexCache) get(pattern string) (*regexp.Regexp, bool) {
	if rc.fixed != nil {
		return rc.fixed, true
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if re, ok := rc.last[pattern]; ok {
		return re, re != nil
	}
	re, err := regexp.Compile(javaRegex(pattern))
	if err != nil {
		re = nil
	}
	if len(rc.last) > 64 {
		clear(rc.last)
	}
	rc.last[pattern] = re
	return re, re != nil
}

// javaRegex adapts the common Java-only syntax to RE2: possessive and
// atomic forms are not supported by either translation, so the pattern is
// passed through; RE2's syntax covers Java's for the usual cases.
func javaRegex(p string) string { return p }

// regexpExtract is REGEXP_EXTRACT(s, regex [, group]): the group (0 = the
// whole match) of the first match, NULL when nothing matches or the group
// does not exist or the regex is invalid.
func regexpExtract(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[:2]...); err != nil {
		return nil, err
	}
	rc, err := newRegexCache(args[1])
	if err != nil {
		return nil, err
	}
	extract := func(s, p types.Value, g int64) (types.Value, error) {
		re, ok := rc.get(p.Str())
		if !ok || g < 0 || g > int64(re.NumSubexp()) {
			return types.Null, nil
		}
		m := re.FindStringSubmatchIndex(s.Str())
		if m == nil || m[2*g] < 0 {
			return types.Null, nil
		}
		return types.String(s.Str()[m[2*g]:m[2*g+1]]), nil
	}
	t := strType(true)
	if len(args) == 2 {
		return strict2(t, pos, args[0], args[1], func(s, p types.Value) (types.Value, error) { return extract(s, p, 0) }), nil
	}
	if err := wantInts(pos, name, args[2]); err != nil {
		return nil, err
	}
	return strict3(t, pos, args[0], args[1], args[2], func(s, p, g types.Value) (types.Value, error) {
		return extract(s, p, g.Int64())
	}), nil
}

var javaGroupRef = regexp.MustCompile(`\$(\d+)`)

func regexpReplace(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	rc, err := newRegexCache(args[1])
	if err != nil {
		return nil, err
	}
	return strict3(strType(true), pos, args[0], args[1], args[2], func(s, p, r types.Value) (types.Value, error) {
		re, ok := rc.get(p.Str())
		if !ok {
			return types.Null, nil
		}
		repl := javaGroupRef.ReplaceAllString(r.Str(), "$${$1}")
		return types.String(re.ReplaceAllString(s.Str(), repl)), nil
	}), nil
}

// splitIndex is SPLIT_INDEX(s, sep, i): the i-th (0-based) piece of s
// split at every occurrence of sep, NULL when out of range.
func splitIndex(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[:2]...); err != nil {
		return nil, err
	}
	if err := wantInts(pos, name, args[2]); err != nil {
		return nil, err
	}
	return strict3(strType(true), pos, args[0], args[1], args[2], func(s, sep, i types.Value) (types.Value, error) {
		idx := i.Int64()
		str, d := s.Str(), sep.Str()
		if idx < 0 {
			return types.Null, nil
		}
		if d == "" {
			if idx == 0 && str != "" {
				return s, nil
			}
			return types.Null, nil
		}
		for ; idx > 0; idx-- {
			j := strings.Index(str, d)
			if j < 0 {
				return types.Null, nil
			}
			str = str[j+len(d):]
		}
		if j := strings.Index(str, d); j >= 0 {
			str = str[:j]
		}
		return types.String(str), nil
	}), nil
}

func initcap(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	return strict1(strType(anyNullable(args...)), pos, args[0], func(v types.Value) (types.Value, error) {
		var b strings.Builder
		start := true
		for _, r := range v.Str() {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				if start {
					b.WriteRune(unicode.ToUpper(r))
				} else {
					b.WriteRune(unicode.ToLower(r))
				}
				start = false
			} else {
				b.WriteRune(r)
				start = true
			}
		}
		return types.String(b.String()), nil
	}), nil
}

func reverseFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	return strict1(strType(anyNullable(args...)), pos, args[0], func(v types.Value) (types.Value, error) {
		r := []rune(v.Str())
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return types.String(string(r)), nil
	}), nil
}

func repeatFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 2); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[0]); err != nil {
		return nil, err
	}
	if err := wantInts(pos, name, args[1]); err != nil {
		return nil, err
	}
	return strict2(strType(anyNullable(args...)), pos, args[0], args[1], func(s, n types.Value) (types.Value, error) {
		k := n.Int64()
		if k <= 0 {
			return types.String(""), nil
		}
		if int64(len(s.Str()))*k > 1<<26 {
			return types.Null, errorf(pos, "REPEAT result too large")
		}
		return types.String(strings.Repeat(s.Str(), int(k))), nil
	}), nil
}

// padFn is LPAD/RPAD(s, len, pad): NULL for a negative length or an empty
// pad that would be needed.
func padFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[0], args[2]); err != nil {
		return nil, err
	}
	if err := wantInts(pos, name, args[1]); err != nil {
		return nil, err
	}
	left := name == "LPAD"
	return strict3(strType(true), pos, args[0], args[1], args[2], func(s, n, p types.Value) (types.Value, error) {
		want := n.Int64()
		if want < 0 || want > 1<<26 {
			return types.Null, nil
		}
		rs := []rune(s.Str())
		if int64(len(rs)) >= want {
			return types.String(string(rs[:want])), nil
		}
		pad := []rune(p.Str())
		if len(pad) == 0 {
			return types.Null, nil
		}
		fill := make([]rune, 0, want-int64(len(rs)))
		for i := 0; int64(len(fill)) < want-int64(len(rs)); i++ {
			fill = append(fill, pad[i%len(pad)])
		}
		if left {
			return types.String(string(fill) + string(rs)), nil
		}
		return types.String(string(rs) + string(fill)), nil
	}), nil
}

func leftRight(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 2); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[0]); err != nil {
		return nil, err
	}
	if err := wantInts(pos, name, args[1]); err != nil {
		return nil, err
	}
	left := name == "LEFT"
	return strict2(strType(anyNullable(args...)), pos, args[0], args[1], func(s, n types.Value) (types.Value, error) {
		k := n.Int64()
		if k <= 0 {
			return types.String(""), nil
		}
		cnt := int64(utf8.RuneCountInString(s.Str()))
		if k >= cnt {
			return s, nil
		}
		if left {
			return types.String(runeSlice(s.Str(), 0, k)), nil
		}
		return types.String(runeSlice(s.Str(), cnt-k, cnt)), nil
	}), nil
}

// like compiles x [NOT] LIKE pattern [ESCAPE e]: '%' matches any sequence
// of characters, '_' one character; the escape character makes the next
// one literal. A constant pattern is compiled once.
func (c *compiler) like(e *ast.Like) (*node, error) {
	if e.Similar {
		return nil, errorf(e.Pos, "SIMILAR TO is not supported yet")
	}
	args := []ast.Expr{e.X, e.Pattern}
	if e.Escape != nil {
		args = append(args, e.Escape)
	}
	ns, err := c.exprs(args)
	if err != nil {
		return nil, err
	}
	if err := wantStrings(e.Pos, "LIKE", ns...); err != nil {
		return nil, err
	}
	esc := rune(-1)
	if len(ns) == 3 {
		if !ns[2].konst {
			return nil, errorf(ns[2].pos, "the ESCAPE of LIKE must be a literal")
		}
		if !ns[2].val.IsNull() {
			s := ns[2].val.Str()
			if utf8.RuneCountInString(s) != 1 {
				return nil, errorf(ns[2].pos, "the ESCAPE of LIKE must be one character, not '%s'", s)
			}
			esc, _ = utf8.DecodeRuneInString(s)
		}
	}
	not := e.Not
	t := types.BooleanType.WithNotNull(!anyNullable(ns[:2]...))
	if ns[1].konst && !ns[1].val.IsNull() {
		m, err := compileLike(ns[1].val.Str(), esc)
		if err != nil {
			return nil, errorf(ns[1].pos, "%v", err)
		}
		return strict1(t, e.Pos, ns[0], func(v types.Value) (types.Value, error) {
			return types.Bool(m.match(v.Str()) != not), nil
		}), nil
	}
	return strict2(t, e.Pos, ns[0], ns[1], func(v, p types.Value) (types.Value, error) {
		m, err := compileLike(p.Str(), esc)
		if err != nil {
			return types.Null, errorf(e.Pos, "%v", err)
		}
		return types.Bool(m.match(v.Str()) != not), nil
	}), nil
}

// likeMatcher matches a LIKE pattern; simple shapes (exact, prefix%,
// %suffix, %infix%) avoid the general matcher.
type likeMatcher struct {
	kind  int // 0 general, 1 exact, 2 prefix, 3 suffix, 4 contains
	lit   string
	parts []likePart
}

type likePart struct {
	any  bool // '%'
	one  bool // '_'
	text string
}

func compileLike(p string, esc rune) (*likeMatcher, error) {
	var parts []likePart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, likePart{text: lit.String()})
			lit.Reset()
		}
	}
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == esc:
			if i+1 >= len(rs) || (rs[i+1] != '%' && rs[i+1] != '_' && rs[i+1] != esc) {
				return nil, errInvalidEscape(p)
			}
			i++
			lit.WriteRune(rs[i])
		case r == '%':
			flush()
			if len(parts) == 0 || !parts[len(parts)-1].any {
				parts = append(parts, likePart{any: true})
			}
		case r == '_':
			flush()
			parts = append(parts, likePart{one: true})
		default:
			lit.WriteRune(r)
		}
	}
	flush()
	m := &likeMatcher{parts: parts}
	switch {
	case len(parts) == 0:
		m.kind, m.lit = 1, ""
	case len(parts) == 1 && parts[0].text != "":
		m.kind, m.lit = 1, parts[0].text
	case len(parts) == 2 && parts[0].text != "" && parts[1].any:
		m.kind, m.lit = 2, parts[0].text
	case len(parts) == 2 && parts[0].any && parts[1].text != "":
		m.kind, m.lit = 3, parts[1].text
	case len(parts) == 3 && parts[0].any && parts[1].text != "" && parts[2].any:
		m.kind, m.lit = 4, parts[1].text
	}
	return m, nil
}

type likeError string

func (e likeError) Error() string { return string(e) }

func errInvalidEscape(p string) error {
	return likeError("invalid escape sequence in LIKE pattern '" + p + "'")
}

func (m *likeMatcher) match(s string) bool {
	switch m.kind {
	case 1:
		return s == m.lit
	case 2:
		return strings.HasPrefix(s, m.lit)
	case 3:
		return strings.HasSuffix(s, m.lit)
	case 4:
		return strings.Contains(s, m.lit)
	}
	return likeMatch(m.parts, s)
}

// likeMatch is glob matching with one backtrack point (the last '%'),
// which is enough because a later '%' can absorb anything an earlier one
// would: O(len(s) × len(parts)), no recursion.
func likeMatch(parts []likePart, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for {
		if pi < len(parts) {
			p := parts[pi]
			switch {
			case p.any:
				starP, starS = pi, si
				pi++
				continue
			case p.one:
				if si < len(s) {
					_, sz := utf8.DecodeRuneInString(s[si:])
					si += sz
					pi++
					continue
				}
			default:
				if strings.HasPrefix(s[si:], p.text) {
					si += len(p.text)
					pi++
					continue
				}
			}
		} else if si == len(s) {
			return true
		}
		if starP < 0 || starS >= len(s) {
			return false
		}
		_, sz := utf8.DecodeRuneInString(s[starS:])
		starS += sz
		si, pi = starS, starP+1
	}
}
