package expr

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// localFields are the calendar fields of a wall-clock reading.
type localFields struct {
	days      int64 // since epoch
	y, mo, d  int64
	h, mi, s  int64
	nanos     int64 // of the second
	offsetSec int   // the zone offset, for Z/X patterns
}

func fieldsOf(ms int64, nanoOfMilli int32, offset int) localFields {
	days, msOfDay := types.SplitMillis(ms)
	y, mo, d := types.CivilFromDays(days)
	sec := msOfDay / 1000
	return localFields{days: days, y: y, mo: mo, d: d, h: sec / 3600, mi: sec / 60 % 60, s: sec % 60,
		nanos: msOfDay%1000*1e6 + int64(nanoOfMilli), offsetSec: offset}
}

// localOf returns the wall-clock millis of a TIMESTAMP, TIMESTAMP_LTZ (in
// the session zone) or DATE value, and the zone offset.
func localOf(v types.Value, loc *time.Location) (int64, int32, int) {
	switch v.Kind() {
	case types.KindDate:
		return v.Int64() * 86400000, 0, 0
	case types.KindTimestampLTZ:
		l := types.InstantToLocalMillis(v.EpochMillis(), loc)
		return l, v.NanoOfMilli(), int((l - v.EpochMillis()) / 1000)
	}
	return v.EpochMillis(), v.NanoOfMilli(), 0
}

// A pattern is a Java date-time pattern (SimpleDateFormat /
// DateTimeFormatter letters): runs of a letter, and literal text ('quoted'
// or any non-letter).
type patItem struct {
	letter byte
	count  int
	lit    string
}

var monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
var dayNames = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

func compilePattern(p string) ([]patItem, error) {
	var items []patItem
	for i := 0; i < len(p); {
		ch := p[i]
		switch {
		case ch == '\'':
			j := i + 1
			var lit strings.Builder
			for {
				if j >= len(p) {
					return nil, fmt.Errorf("unterminated quote in date pattern '%s'", p)
				}
				if p[j] == '\'' {
					if j+1 < len(p) && p[j+1] == '\'' {
						lit.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				lit.WriteByte(p[j])
				j++
			}
			if j == i+1 {
				items = append(items, patItem{lit: "'"})
			} else {
				items = append(items, patItem{lit: lit.String()})
			}
			i = j + 1
		case ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			j := i
			for j < len(p) && p[j] == ch {
				j++
			}
			if !strings.ContainsRune("yMdHhKkmsSaEDuZXz", rune(ch)) {
				return nil, fmt.Errorf("unsupported letter '%c' in date pattern '%s'", ch, p)
			}
			items = append(items, patItem{letter: ch, count: j - i})
			i = j
		default:
			items = append(items, patItem{lit: string(ch)})
			i++
		}
	}
	return items, nil
}

func appendNum(dst []byte, v int64, width int) []byte {
	s := strconv.FormatInt(v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

func formatPattern(dst []byte, items []patItem, f localFields) []byte {
	for _, it := range items {
		if it.letter == 0 {
			dst = append(dst, it.lit...)
			continue
		}
		n := it.count
		switch it.letter {
		case 'y':
			if n == 2 {
				dst = appendNum(dst, (f.y%100+100)%100, 2)
			} else {
				dst = appendNum(dst, f.y, n)
			}
		case 'M':
			switch {
			case n >= 4:
				dst = append(dst, monthNames[f.mo-1]...)
			case n == 3:
				dst = append(dst, monthNames[f.mo-1][:3]...)
			default:
				dst = appendNum(dst, f.mo, n)
			}
		case 'd':
			dst = appendNum(dst, f.d, n)
		case 'D':
			dst = appendNum(dst, f.days-types.DaysFromCivil(f.y, 1, 1)+1, n)
		case 'H':
			dst = appendNum(dst, f.h, n)
		case 'k':
			h := f.h
			if h == 0 {
				h = 24
			}
			dst = appendNum(dst, h, n)
		case 'h':
			h := f.h % 12
			if h == 0 {
				h = 12
			}
			dst = appendNum(dst, h, n)
		case 'K':
			dst = appendNum(dst, f.h%12, n)
		case 'm':
			dst = appendNum(dst, f.mi, n)
		case 's':
			dst = appendNum(dst, f.s, n)
		case 'S':
			digits := appendNum(nil, f.nanos, 9)
			for len(digits) < n {
				digits = append(digits, '0')
			}
			dst = append(dst, digits[:n]...)
		case 'a':
			if f.h < 12 {
				dst = append(dst, "AM"...)
			} else {
				dst = append(dst, "PM"...)
			}
		case 'E', 'u':
			dow := ((f.days%7)+7+3)%7 + 1 // 1 = Monday; 1970-01-01 was a Thursday
			if it.letter == 'u' {
				dst = appendNum(dst, dow, n)
			} else if n >= 4 {
				dst = append(dst, dayNames[dow-1]...)
			} else {
				dst = append(dst, dayNames[dow-1][:3]...)
			}
		case 'Z', 'X', 'z':
			off := f.offsetSec
			if it.letter == 'X' && off == 0 {
				dst = append(dst, 'Z')
				continue
			}
			sign := byte('+')
			if off < 0 {
				sign, off = '-', -off
			}
			dst = append(dst, sign)
			dst = appendNum(dst, int64(off/3600), 2)
			if it.letter == 'X' && n >= 3 || it.letter == 'z' {
				dst = append(dst, ':')
			}
			dst = appendNum(dst, int64(off/60%60), 2)
		}
	}
	return dst
}

// parsePattern parses text by a pattern into wall-clock millis and nanos
// of the milli. Numeric fields take up to their natural width of digits,
// or exactly their letter count when another number follows directly.
func parsePattern(items []patItem, s string) (int64, int32, bool) {
	y, mo, d, h, mi, sec, ns := int64(1970), int64(1), int64(1), int64(0), int64(0), int64(0), int64(0)
	pm, has12 := false, false
	i := 0
	for k, it := range items {
		if it.letter == 0 {
			if !strings.HasPrefix(s[i:], it.lit) {
				return 0, 0, false
			}
			i += len(it.lit)
			continue
		}
		if it.letter == 'a' {
			switch {
			case strings.HasPrefix(strings.ToUpper(s[i:]), "AM"):
			case strings.HasPrefix(strings.ToUpper(s[i:]), "PM"):
				pm = true
			default:
				return 0, 0, false
			}
			i += 2
			continue
		}
		if it.letter == 'M' && it.count >= 3 {
			found := false
			for m, name := range monthNames {
				cand := name
				if it.count == 3 {
					cand = name[:3]
				}
				if strings.HasPrefix(strings.ToLower(s[i:]), strings.ToLower(cand)) {
					mo, i, found = int64(m+1), i+len(cand), true
					break
				}
			}
			if !found {
				return 0, 0, false
			}
			continue
		}
		width := map[byte]int{'y': 9, 'M': 2, 'd': 2, 'D': 3, 'H': 2, 'k': 2, 'h': 2, 'K': 2, 'm': 2, 's': 2, 'S': 9}[it.letter]
		if width == 0 {
			return 0, 0, false // zone and day names are not parsed
		}
		if k+1 < len(items) && items[k+1].letter != 0 || it.letter == 'S' && it.count > 1 && it.count < 9 && k+1 < len(items) && items[k+1].letter != 0 {
			width = it.count
		}
		j := i
		for j < len(s) && j-i < width && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i {
			return 0, 0, false
		}
		v, _ := strconv.ParseInt(s[i:j], 10, 64)
		switch it.letter {
		case 'y':
			y = v
			if it.count == 2 && j-i == 2 {
				y = 2000 + v
			}
		case 'M':
			mo = v
		case 'd':
			d = v
		case 'H', 'k':
			h = v % 24
		case 'h', 'K':
			h, has12 = v%12, true
		case 'm':
			mi = v
		case 's':
			sec = v
		case 'S':
			ns = v * types.Pow10(9-(j-i))
		}
		i = j
	}
	if i != len(s) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59 {
		return 0, 0, false
	}
	if has12 && pm {
		h += 12
	}
	days := types.DaysFromCivil(y, mo, d)
	if y2, m2, d2 := types.CivilFromDays(days); y2 != y || m2 != mo || d2 != d {
		return 0, 0, false
	}
	ms := days*86400000 + (h*3600+mi*60+sec)*1000 + ns/1e6
	return ms, int32(ns % 1e6), true
}

// patternArg compiles a constant pattern once, or each call otherwise.
func patternArg(n *node) (func(string) ([]patItem, error), error) {
	if n.konst && !n.val.IsNull() {
		items, err := compilePattern(n.val.Str())
		if err != nil {
			return nil, errorf(n.pos, "%v", err)
		}
		return func(string) ([]patItem, error) { return items, nil }, nil
	}
	return compilePattern, nil
}

// dateFormat is DATE_FORMAT(ts, pattern): ts is a TIMESTAMP, a
// TIMESTAMP_LTZ (shown in the session zone) or a string holding a
// timestamp (NULL when it does not parse).
func dateFormat(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 2); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a timestamp or string", isTsOrStr); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args[1]); err != nil {
		return nil, err
	}
	pat, err := patternArg(args[1])
	if err != nil {
		return nil, err
	}
	loc := c.loc
	isString := args[0].typ.Kind.IsString()
	return strict2(strType(anyNullable(args...) || isString), pos, args[0], args[1], func(v, p types.Value) (types.Value, error) {
		items, err := pat(p.Str())
		if err != nil {
			return types.Null, &types.Error{Pos: pos, Msg: err.Error()}
		}
		var ms int64
		var ns int32
		off := 0
		if isString {
			var err error
			if ms, ns, err = types.ParseTimestamp(v.Str()); err != nil {
				return types.Null, nil
			}
		} else {
			ms, ns, off = localOf(v, loc)
		}
		var buf [64]byte
		return types.String(string(formatPattern(buf[:0], items, fieldsOf(ms, ns, off)))), nil
	}), nil
}

// toTimestamp is TO_TIMESTAMP(s [, pattern]): TIMESTAMP(3), NULL when s
// does not parse.
func toTimestamp(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	t := types.TimestampOf(3)
	if len(args) == 1 {
		return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
			ms, ns, err := types.ParseTimestamp(v.Str())
			if err != nil {
				return types.Null, nil
			}
			return types.Timestamp(ms, ns-ns%1e6, 3), nil
		}), nil
	}
	pat, err := patternArg(args[1])
	if err != nil {
		return nil, err
	}
	return strict2(t, pos, args[0], args[1], func(v, p types.Value) (types.Value, error) {
		items, err := pat(p.Str())
		if err != nil {
			return types.Null, nil
		}
		ms, _, ok := parsePattern(items, v.Str())
		if !ok {
			return types.Null, nil
		}
		return types.Timestamp(ms, 0, 3), nil
	}), nil
}

func toDate(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	ts, err := toTimestamp(c, pos, "TO_DATE", args)
	if err != nil {
		return nil, err
	}
	return c.castNode(ts, types.DateType, false, pos)
}

// toTimestampLTZ is TO_TIMESTAMP_LTZ(epoch, precision): epoch seconds
// (precision 0) or milliseconds (precision 3) as TIMESTAMP_LTZ(3).
func toTimestampLTZ(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a number", isNum); err != nil {
		return nil, err
	}
	prec := int64(3)
	if len(args) == 2 {
		var ok bool
		if prec, ok = constInt(args[1]); !ok || (prec != 0 && prec != 3) {
			return nil, errorf(args[1].pos, "the precision of TO_TIMESTAMP_LTZ must be 0 (seconds) or 3 (milliseconds)")
		}
	}
	scale := float64(1)
	mul := int64(1)
	if prec == 0 {
		scale, mul = 1000, 1000
	}
	isInt := args[0].typ.Kind.IsInteger()
	t := nullableIf(types.TimestampLTZOf(3), anyNullable(args[0]))
	if a := args[0]; isInt && a.col > 0 {
		// TO_TIMESTAMP_LTZ(col, p) of an integer column, the usual
		// rowtime of a table: one call per row.
		i := a.col - 1
		return derive(t, pos, func(row []types.Value) (types.Value, error) {
			x := row[i]
			if x.IsNull() {
				return types.Null, nil
			}
			return types.TimestampLTZ(x.Int64()*mul, 0, 3), nil
		}, a), nil
	}
	return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
		if isInt {
			return types.TimestampLTZ(v.Int64()*mul, 0, 3), nil
		}
		return types.TimestampLTZ(int64(numToFloat(v)*scale), 0, 3), nil
	}), nil
}

func fromUnixtime(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantInts(pos, name, args[0]); err != nil {
		return nil, err
	}
	pat := func(string) ([]patItem, error) { return compilePattern("yyyy-MM-dd HH:mm:ss") }
	patArg := constNode(types.String("yyyy-MM-dd HH:mm:ss"), types.StringType.WithNotNull(true), pos)
	if len(args) == 2 {
		var err error
		if pat, err = patternArg(args[1]); err != nil {
			return nil, err
		}
		patArg = args[1]
	}
	loc := c.loc
	return strict2(strType(anyNullable(args...)), pos, args[0], patArg, func(v, p types.Value) (types.Value, error) {
		items, err := pat(p.Str())
		if err != nil {
			return types.Null, nil
		}
		inst := v.Int64() * 1000
		l := types.InstantToLocalMillis(inst, loc)
		return types.String(string(formatPattern(nil, items, fieldsOf(l, 0, int((l-inst)/1000))))), nil
	}), nil
}

func unixTimestamp(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 0, 2); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		now := c.now
		return &node{typ: types.BigIntType.WithNotNull(true), pos: pos, nondet: true, eval: func([]types.Value) (types.Value, error) {
			return types.Int64(now().Unix()), nil
		}}, nil
	}
	if err := wantStrings(pos, name, args...); err != nil {
		return nil, err
	}
	ts, err := toTimestamp(c, pos, name, args)
	if err != nil {
		return nil, err
	}
	loc := c.loc
	return strict1(types.BigIntType, pos, ts, func(v types.Value) (types.Value, error) {
		s, _ := floorDiv(types.LocalToInstantMillis(v.EpochMillis(), loc), 1000)
		return types.Int64(s), nil
	}), nil
}

// clockFn covers CURRENT_TIMESTAMP and NOW() (TIMESTAMP_LTZ(3)),
// LOCALTIMESTAMP (TIMESTAMP(3)), CURRENT_DATE, CURRENT_TIME and LOCALTIME.
// They read the processing-time clock per evaluation and are marked
// non-deterministic. PROCTIME() is NOW() to the compiler; the planner
// makes a column of it the processing-time attribute.
func clockFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 0, 0); err != nil {
		return nil, err
	}
	now, loc := c.now, c.loc
	n := &node{pos: pos, nondet: true}
	switch name {
	case "CURRENT_TIMESTAMP", "NOW", "CURRENT_ROW_TIMESTAMP", "PROCTIME":
		n.typ = types.TimestampLTZOf(3).WithNotNull(true)
		n.eval = func([]types.Value) (types.Value, error) { return types.TimestampLTZ(now().UnixMilli(), 0, 3), nil }
	case "LOCALTIMESTAMP":
		n.typ = types.TimestampOf(3).WithNotNull(true)
		n.eval = func([]types.Value) (types.Value, error) {
			return types.Timestamp(types.InstantToLocalMillis(now().UnixMilli(), loc), 0, 3), nil
		}
	case "CURRENT_DATE":
		n.typ = types.DateType.WithNotNull(true)
		n.eval = func([]types.Value) (types.Value, error) {
			d, _ := types.SplitMillis(types.InstantToLocalMillis(now().UnixMilli(), loc))
			return types.Date(d), nil
		}
	default:
		n.typ = types.TimeOf(0).WithNotNull(true)
		n.eval = func([]types.Value) (types.Value, error) {
			_, ms := types.SplitMillis(types.InstantToLocalMillis(now().UnixMilli(), loc))
			return types.Time(ms/1000*1e9, 0), nil
		}
	}
	return n, nil
}

func extractFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	unit := map[string]string{"DAYOFYEAR": "DOY", "DAYOFMONTH": "DAY", "DAYOFWEEK": "DOW"}[name]
	if unit == "" {
		unit = name
	}
	return c.extract(pos, unit, args[0])
}

// extract is EXTRACT(unit FROM x) for DATE, TIME, TIMESTAMP and
// TIMESTAMP_LTZ (in the session zone), as Calcite defines the units: DOW
// is 1 (Sunday) to 7, MILLISECOND and MICROSECOND include the seconds,
// EPOCH is seconds since 1970-01-01 of the wall clock.
func (c *compiler) extract(pos ast.Pos, unit string, x *node) (*node, error) {
	k := x.typ.Kind
	if !k.IsTemporal() && k != types.KindNull {
		return nil, errorf(pos, "EXTRACT expects a DATE, TIME or TIMESTAMP, not %s", typeName(x.typ))
	}
	dateUnit := map[string]bool{"YEAR": true, "QUARTER": true, "MONTH": true, "WEEK": true, "DAY": true, "DOY": true,
		"DOW": true, "ISODOW": true, "ISOYEAR": true, "DECADE": true, "CENTURY": true, "MILLENNIUM": true, "EPOCH": true}
	timeUnit := map[string]bool{"HOUR": true, "MINUTE": true, "SECOND": true, "MILLISECOND": true, "MICROSECOND": true, "NANOSECOND": true}
	if !dateUnit[unit] && !timeUnit[unit] || k == types.KindDate && timeUnit[unit] || k == types.KindTime && dateUnit[unit] {
		return nil, errorf(pos, "cannot extract %s from %s", unit, typeName(x.typ))
	}
	loc := c.loc
	return strict1(nullableIf(types.BigIntType, x.typ.Nullable()), pos, x, func(v types.Value) (types.Value, error) {
		var f localFields
		if v.Kind() == types.KindTime {
			ns := v.Int64()
			f = localFields{h: ns / 3_600_000_000_000, mi: ns / 60_000_000_000 % 60, s: ns / 1e9 % 60, nanos: ns % 1e9}
		} else {
			ms, nm, _ := localOf(v, loc)
			f = fieldsOf(ms, nm, 0)
		}
		return types.Int64(extractField(unit, f)), nil
	}), nil
}

func extractField(unit string, f localFields) int64 {
	isoDow := ((f.days%7)+7+3)%7 + 1
	switch unit {
	case "YEAR":
		return f.y
	case "QUARTER":
		return (f.mo-1)/3 + 1
	case "MONTH":
		return f.mo
	case "DAY":
		return f.d
	case "DOY":
		return f.days - types.DaysFromCivil(f.y, 1, 1) + 1
	case "DOW":
		return isoDow%7 + 1
	case "ISODOW":
		return isoDow
	case "WEEK", "ISOYEAR":
		// ISO week: the week with the year's first Thursday is week 1.
		thursday := f.days - isoDow + 4
		ty, _, _ := types.CivilFromDays(thursday)
		if unit == "ISOYEAR" {
			return ty
		}
		return (thursday-types.DaysFromCivil(ty, 1, 1))/7 + 1
	case "DECADE":
		q, _ := floorDiv(f.y, 10)
		return q
	case "CENTURY":
		if f.y > 0 {
			return (f.y + 99) / 100
		}
		return -((-f.y)/100 + 1)
	case "MILLENNIUM":
		if f.y > 0 {
			return (f.y + 999) / 1000
		}
		return -((-f.y)/1000 + 1)
	case "EPOCH":
		return f.days*86400 + f.h*3600 + f.mi*60 + f.s
	case "HOUR":
		return f.h
	case "MINUTE":
		return f.mi
	case "SECOND":
		return f.s
	case "MILLISECOND":
		return f.s*1000 + f.nanos/1e6
	case "MICROSECOND":
		return f.s*1e6 + f.nanos/1e3
	case "NANOSECOND":
		return f.s*1e9 + f.nanos
	}
	return 0
}

// floorCeilTime is FLOOR/CEIL(x TO unit) for TIMESTAMP, TIMESTAMP_LTZ (in
// the session zone) and DATE.
func (c *compiler) floorCeilTime(e *ast.FloorCeil) (*node, error) {
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	k := x.typ.Kind
	if !k.IsTimestamp() && k != types.KindDate {
		return nil, errorf(e.Pos, "FLOOR/CEIL ... TO expects a TIMESTAMP or DATE, not %s", typeName(x.typ))
	}
	unit := string(e.Unit)
	fixed := map[string]int64{"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60000, "HOUR": 3600000, "DAY": 86400000, "WEEK": 7 * 86400000}
	months := map[string]int64{"MONTH": 1, "QUARTER": 3, "YEAR": 12, "DECADE": 120, "CENTURY": 1200, "MILLENNIUM": 12000}
	step, isFixed := fixed[unit]
	mstep, isMonths := months[unit]
	if !isFixed && !isMonths || k == types.KindDate && isFixed && step < 86400000 {
		return nil, errorf(e.Pos, "cannot round %s to %s", typeName(x.typ), unit)
	}
	ceil, loc := e.Ceil, c.loc
	p := x.typ.Precision
	round := func(ms int64, ns int32) int64 {
		exact := ns == 0
		var fl int64
		if isFixed {
			off := int64(0)
			if unit == "WEEK" {
				off = 3 * 86400000 // weeks start on Monday; 1970-01-01 was a Thursday
			}
			q, r := floorDiv(ms+off, step)
			fl = q*step - off
			exact = exact && r == 0
		} else {
			days, rest := types.SplitMillis(ms)
			y, mo, d := types.CivilFromDays(days)
			total := y*12 + mo - 1
			q, r := floorDiv(total, mstep)
			ny, nm := floorDiv(q*mstep, 12)
			fl = types.DaysFromCivil(ny, nm+1, 1) * 86400000
			exact = exact && r == 0 && d == 1 && rest == 0
			if ceil && !exact {
				ny, nm = floorDiv(q*mstep+mstep, 12)
				return types.DaysFromCivil(ny, nm+1, 1) * 86400000
			}
			return fl
		}
		if ceil && !exact {
			fl += step
		}
		return fl
	}
	return strict1(x.typ, e.Pos, x, func(v types.Value) (types.Value, error) {
		switch k {
		case types.KindDate:
			return types.Date(round(v.Int64()*86400000, 0) / 86400000), nil
		case types.KindTimestampLTZ:
			l := types.InstantToLocalMillis(v.EpochMillis(), loc)
			return types.TimestampLTZ(types.LocalToInstantMillis(round(l, v.NanoOfMilli()), loc), 0, p), nil
		}
		return types.Timestamp(round(v.EpochMillis(), v.NanoOfMilli()), 0, p), nil
	}), nil
}

// timestampDiffAdd is TIMESTAMPDIFF(unit, a, b) (INT: whole units from a
// to b) and TIMESTAMPADD(unit, n, ts).
func (c *compiler) timestampDiffAdd(e *ast.Call, name string) (*node, error) {
	if len(e.Args) != 3 {
		return nil, errorf(e.Pos, "function %s takes 3 arguments, got %d", name, len(e.Args))
	}
	u, ok := e.Args[0].(*ast.TimeUnitArg)
	if !ok {
		return nil, errorf(e.Args[0].Position(), "the first argument of %s must be a time unit (SECOND, MINUTE, ...)", name)
	}
	args, err := c.exprs(e.Args[1:])
	if err != nil {
		return nil, err
	}
	unit := string(u.Unit)
	fixed := map[string]int64{"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60000, "HOUR": 3600000, "DAY": 86400000, "WEEK": 7 * 86400000}
	months := map[string]int64{"MONTH": 1, "QUARTER": 3, "YEAR": 12}
	step, isFixed := fixed[unit]
	mstep, isMonths := months[unit]
	if !isFixed && !isMonths {
		return nil, errorf(u.Pos, "unsupported unit %s for %s", unit, name)
	}
	loc := c.loc
	local := func(v types.Value) int64 { ms, _, _ := localOf(v, loc); return ms }
	if name == "TIMESTAMPADD" {
		if err := wantInts(e.Pos, name, args[0]); err != nil {
			return nil, err
		}
		if err := wantKind(e.Pos, name, args[1], "a timestamp or date", func(k types.Kind) bool { return k.IsTimestamp() || k == types.KindDate }); err != nil {
			return nil, err
		}
		t := args[1].typ
		if t.Kind == types.KindDate && isFixed && step < 86400000 {
			t = types.TimestampOf(0)
		}
		rt := nullableIf(t, anyNullable(args...))
		return strict2(rt, e.Pos, args[0], args[1], func(n, v types.Value) (types.Value, error) {
			ms, ns, _ := localOf(v, loc)
			if isFixed {
				ms += n.Int64() * step
			} else {
				ms = addMonthsMillis(ms, n.Int64()*mstep)
			}
			switch rt.Kind {
			case types.KindDate:
				d, _ := types.SplitMillis(ms)
				return types.Date(d), nil
			case types.KindTimestampLTZ:
				return types.TimestampLTZ(types.LocalToInstantMillis(ms, loc), ns, rt.Precision), nil
			}
			return types.Timestamp(ms, ns, rt.Precision), nil
		}), nil
	}
	for _, a := range args {
		if err := wantKind(e.Pos, name, a, "a timestamp or date", func(k types.Kind) bool { return k.IsTimestamp() || k == types.KindDate }); err != nil {
			return nil, err
		}
	}
	return strict2(nullableIf(types.IntType, anyNullable(args...)), e.Pos, args[0], args[1], func(a, b types.Value) (types.Value, error) {
		x, y := local(a), local(b)
		if isFixed {
			return types.Int32(int32((y - x) / step)), nil
		}
		dx, rx := types.SplitMillis(x)
		dy, ry := types.SplitMillis(y)
		y1, m1, d1 := types.CivilFromDays(dx)
		y2, m2, d2 := types.CivilFromDays(dy)
		diff := (y2*12 + m2) - (y1*12 + m1)
		if diff > 0 && (d2 < d1 || d2 == d1 && ry < rx) {
			diff--
		} else if diff < 0 && (d2 > d1 || d2 == d1 && ry > rx) {
			diff++
		}
		return types.Int32(int32(diff / mstep)), nil
	}), nil
}
