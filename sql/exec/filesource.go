package exec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// fileSourceOptions are the options a filesystem table takes when it is
// read: Flink's csv and json format options, and clink's replay rate.
var fileSourceOptions = map[string]string{
	"csv.field-delimiter":         "one character between fields (default ','; '\\t' for a tab)",
	"csv.quote-character":         "character that quotes a field (default '\"')",
	"csv.disable-quote-character": "true: fields are never quoted (default false)",
	"csv.escape-character":        "character that makes the next one literal (default none)",
	"csv.allow-comments":          "true: skip lines that start with '#' (default false)",
	"csv.ignore-parse-errors":     "true: a field that does not parse is NULL and a malformed record is skipped, instead of failing the job (default false)",
	"csv.null-literal":            "text of a NULL field (default: an empty unquoted field is NULL)",
	"json.ignore-parse-errors":    "true: a field that does not parse is NULL and a malformed line is skipped, instead of failing the job (default false)",
	"json.fail-on-missing-field":  "true: a line without a column's field fails the job (default false: NULL)",
	"json.timestamp-format.standard": "SQL ('2024-01-01 12:00:00') or ISO-8601 ('2024-01-01T12:00:00'); " +
		"both are read either way (default SQL)",
	"source.rows-per-second": "read at most this many rows per second over all subtasks (default 0: unlimited)",
}

// withFileSource makes the filesystem connector a source as well: a table
// of it can be read, from a file or a directory of files.
func withFileSource(c *catalog.Connector) *catalog.Connector {
	c.Source = true
	opts := maps.Clone(c.Options)
	maps.Copy(opts, fileSourceOptions)
	c.Options = opts
	validate := c.Validate
	c.Validate = func(t *catalog.Table) error {
		if validate != nil {
			if err := validate(t); err != nil {
				return err
			}
		}
		_, err := newFileFormat(t)
		return err
	}
	return c
}

// fileFormat is how a filesystem table's records are read.
type fileFormat struct {
	table  string
	cols   []catalog.Column
	json   bool
	rate   float64 // rows per second over all subtasks; 0 unlimited
	ignore bool    // ignore parse errors
	// csv
	delim, quote, escape byte
	comments             bool
	nullLiteral          string
	hasNullLiteral       bool
	// json
	failOnMissing bool
}

// newFileFormat reads a filesystem table's source options; errors name
// the option.
func newFileFormat(t *catalog.Table) (*fileFormat, error) {
	f := &fileFormat{table: t.Name, cols: t.Physical(), json: t.Options["format"] == "json", delim: ',', quote: '"'}
	bad := func(key, want string) error {
		return &types.Error{Pos: t.OptionPosition(key), Msg: fmt.Sprintf("table '%s': option '%s' %s, got '%s'", t.Name, key, want, t.Options[key])}
	}
	boolOpt := func(key string) (bool, error) {
		v, ok := t.Options[key]
		if !ok {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, bad(key, "must be true or false")
		}
		return b, nil
	}
	charOpt := func(key string) (byte, bool, error) {
		v, ok := t.Options[key]
		if !ok {
			return 0, false, nil
		}
		switch v {
		case `\t`:
			v = "\t"
		case `\\`:
			v = `\`
		}
		if len(v) != 1 || v[0] == '\n' || v[0] == '\r' {
			return 0, false, bad(key, "must be one ASCII character other than a line break")
		}
		return v[0], true, nil
	}
	var err error
	if v, ok := t.Options["source.rows-per-second"]; ok {
		r, perr := strconv.ParseFloat(v, 64)
		if perr != nil || r < 0 || math.IsInf(r, 0) {
			return nil, bad("source.rows-per-second", "must be a number of at least 0")
		}
		f.rate = r
	}
	prefix := "csv."
	if f.json {
		prefix = "json."
	}
	for k := range t.Options {
		other := "json."
		if f.json {
			other = "csv."
		}
		if strings.HasPrefix(k, other) {
			return nil, &types.Error{Pos: t.OptionPosition(k), Msg: fmt.Sprintf("table '%s': option '%s' is for 'format' = '%s', but the table's format is '%s'",
				t.Name, k, strings.TrimSuffix(other, "."), t.Options["format"])}
		}
	}
	if f.ignore, err = boolOpt(prefix + "ignore-parse-errors"); err != nil {
		return nil, err
	}
	if f.json {
		if f.failOnMissing, err = boolOpt("json.fail-on-missing-field"); err != nil {
			return nil, err
		}
		if v, ok := t.Options["json.timestamp-format.standard"]; ok && v != "SQL" && v != "ISO-8601" {
			return nil, bad("json.timestamp-format.standard", "must be 'SQL' or 'ISO-8601'")
		}
	} else {
		d, ok, err := charOpt("csv.field-delimiter")
		if err != nil {
			return nil, err
		}
		if ok {
			f.delim = d
		}
		q, hasQuote, err := charOpt("csv.quote-character")
		if err != nil {
			return nil, err
		}
		if hasQuote {
			f.quote = q
		}
		noQuote, err := boolOpt("csv.disable-quote-character")
		if err != nil {
			return nil, err
		}
		if noQuote {
			if hasQuote {
				return nil, &types.Error{Pos: t.OptionPosition("csv.quote-character"), Msg: fmt.Sprintf("table '%s': options 'csv.quote-character' and 'csv.disable-quote-character' = 'true' exclude each other", t.Name)}
			}
			f.quote = 0
		}
		if f.escape, _, err = charOpt("csv.escape-character"); err != nil {
			return nil, err
		}
		if f.comments, err = boolOpt("csv.allow-comments"); err != nil {
			return nil, err
		}
		f.nullLiteral, f.hasNullLiteral = t.Options["csv.null-literal"]
		for _, c := range []struct {
			key string
			ch  byte
		}{{"csv.quote-character", f.quote}, {"csv.escape-character", f.escape}} {
			if c.ch != 0 && c.ch == f.delim {
				return nil, bad(c.key, "must differ from the field delimiter")
			}
		}
		if f.escape != 0 && f.escape == f.quote {
			return nil, bad("csv.escape-character", "must differ from the quote character")
		}
	}
	return f, nil
}

// checkReadable refuses columns the formats cannot read. It is checked
// when a table is read, not when it is created, since a table only
// written may hold them.
func (f *fileFormat) checkReadable(format string) error {
	for _, c := range f.cols {
		if !readable(c.Type.Kind) {
			return &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("table '%s': column '%s' of type %s cannot be read from %s files", f.table, c.Name, c.Type, format)}
		}
	}
	return nil
}

func readable(k types.Kind) bool {
	switch {
	case k == types.KindBoolean, k.IsNumeric(), k.IsString(), k.IsBinary(), k.IsTemporal():
		return true
	}
	return false
}

// fieldError is a field that does not parse; a record that holds one
// fails the job unless parse errors are ignored, and then the field is
// NULL.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// parseField converts a field's text to column c's type.
func parseField(s string, c catalog.Column, field int) (types.Value, error) {
	fail := func(cause error) error {
		msg := fmt.Sprintf("column '%s' (field %d): cannot parse '%s' as %s", c.Name, field, s, c.Type.WithNotNull(false))
		if cause != nil {
			msg += ": " + cause.Error()
		}
		return &fieldError{msg: msg}
	}
	k := c.Type.Kind
	if !k.IsString() && !k.IsBinary() {
		s = strings.TrimSpace(s)
	}
	switch {
	case k == types.KindBoolean:
		switch strings.ToLower(s) {
		case "true":
			return types.Bool(true), nil
		case "false":
			return types.Bool(false), nil
		}
		return types.Null, fail(nil)
	case k.IsInteger():
		bits := 64
		switch k {
		case types.KindTinyInt:
			bits = 8
		case types.KindSmallInt:
			bits = 16
		case types.KindInt:
			bits = 32
		}
		i, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return types.Null, fail(types.ErrOverflow)
			}
			return types.Null, fail(nil)
		}
		return types.IntOf(k, i), nil
	case k.IsApprox():
		bits := 64
		if k == types.KindFloat {
			bits = 32
		}
		// A literal beyond the type's range is an overflow, as for the
		// integers; "Infinity" and "NaN" spelled out are values.
		x, err := strconv.ParseFloat(s, bits)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return types.Null, fail(types.ErrOverflow)
			}
			return types.Null, fail(nil)
		}
		if k == types.KindFloat {
			return types.Float32(float32(x)), nil
		}
		return types.Float64(x), nil
	case k == types.KindDecimal:
		d, err := types.ParseDecimal(s, c.Type.Precision, c.Type.Scale)
		if err != nil {
			return types.Null, fail(err)
		}
		return d, nil
	case k.IsString():
		return types.String(strings.Clone(s)), nil
	case k.IsBinary():
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return types.Null, fail(fmt.Errorf("want standard base64"))
		}
		return types.Bytes(b), nil
	case k == types.KindDate:
		d, err := types.ParseDate(s)
		if err != nil {
			return types.Null, fail(err)
		}
		return types.Date(d), nil
	case k == types.KindTime:
		ns, err := types.ParseTime(s)
		if err != nil {
			return types.Null, fail(err)
		}
		p := c.Type.Precision
		return types.Time(ns/types.Pow10(9-p)*types.Pow10(9-p), p), nil
	case k.IsTimestamp():
		// TIMESTAMP_LTZ text is UTC, with or without the zone's 'Z'.
		if k == types.KindTimestampLTZ {
			s = strings.TrimSuffix(s, "Z")
		}
		ms, ns, err := types.ParseTimestamp(s)
		if err != nil {
			return types.Null, fail(err)
		}
		p := c.Type.Precision
		if p < 3 {
			ms = floorTo(ms, types.Pow10(3-p))
			ns = 0
		} else {
			ns = int32(int64(ns) / types.Pow10(9-p) * types.Pow10(9-p))
		}
		if k == types.KindTimestampLTZ {
			return types.TimestampLTZ(ms, ns, p), nil
		}
		return types.Timestamp(ms, ns, p), nil
	}
	return types.Null, fail(nil)
}

func floorTo(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return x - r
}

// decode turns one record into a row. skip reports a record to leave out:
// a comment, or a malformed record when parse errors are ignored.
func (f *fileFormat) decode(rec []byte) (types.Row, bool, error) {
	var vals []types.Value
	var err error
	if f.json {
		vals, err = f.decodeJSON(rec)
	} else {
		if f.comments && len(rec) > 0 && rec[0] == '#' {
			return types.Row{}, true, nil
		}
		vals, err = f.decodeCSV(rec)
	}
	if err != nil {
		if f.ignore {
			return types.Row{}, true, nil
		}
		return types.Row{}, false, err
	}
	return types.Row{Kind: changelog.Insert, Values: vals}, false, nil
}

// value parses one field, making it NULL when it does not parse and
// errors are ignored, and refuses NULL in a NOT NULL column.
func (f *fileFormat) value(s string, null bool, i int) (types.Value, error) {
	c := f.cols[i]
	v := types.Null
	if !null {
		var err error
		v, err = parseField(s, c, i+1)
		if err != nil {
			if !f.ignore {
				return v, err
			}
			v = types.Null
		}
	}
	if v.IsNull() && c.Type.NotNull {
		return v, fmt.Errorf("column '%s' (field %d) is NOT NULL but the record holds no value for it", c.Name, i+1)
	}
	return v, nil
}

func (f *fileFormat) decodeCSV(rec []byte) ([]types.Value, error) {
	fields, quoted, err := f.splitCSV(rec)
	if err != nil {
		return nil, err
	}
	if len(fields) != len(f.cols) && !f.ignore {
		return nil, fmt.Errorf("the record has %d fields, the table '%s' %d columns", len(fields), f.table, len(f.cols))
	}
	vals := make([]types.Value, len(f.cols))
	for i := range f.cols {
		// A missing field (only when errors are ignored) is NULL.
		null := i >= len(fields)
		if !null {
			if f.hasNullLiteral {
				null = !quoted[i] && fields[i] == f.nullLiteral
			} else {
				null = !quoted[i] && fields[i] == ""
			}
		}
		s := ""
		if i < len(fields) {
			s = fields[i]
		}
		if vals[i], err = f.value(s, null, i); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// splitCSV splits a record into its fields, undoing quoting (a doubled
// quote inside a quoted field is one quote) and escapes; quoted[i] tells
// whether field i was quoted.
func (f *fileFormat) splitCSV(rec []byte) (fields []string, quoted []bool, err error) {
	var sb strings.Builder
	i := 0
	for {
		sb.Reset()
		q := f.quote != 0 && i < len(rec) && rec[i] == f.quote
		if q {
			start := i
			i++
			closed := false
			for i < len(rec) && !closed {
				switch c := rec[i]; {
				case f.escape != 0 && c == f.escape && i+1 < len(rec):
					sb.WriteByte(rec[i+1])
					i += 2
				case c == f.quote && i+1 < len(rec) && rec[i+1] == f.quote:
					sb.WriteByte(c)
					i += 2
				case c == f.quote:
					closed = true
					i++
				default:
					sb.WriteByte(c)
					i++
				}
			}
			if !closed {
				return nil, nil, fmt.Errorf("field %d: the quoted field opened at byte %d is not closed", len(fields)+1, start+1)
			}
			if i < len(rec) && rec[i] != f.delim {
				return nil, nil, fmt.Errorf("field %d: %q after the closing quote at byte %d (want the delimiter %q)", len(fields)+1, rec[i], i+1, f.delim)
			}
		} else {
			for i < len(rec) && rec[i] != f.delim {
				if f.escape != 0 && rec[i] == f.escape && i+1 < len(rec) {
					i++
				}
				sb.WriteByte(rec[i])
				i++
			}
		}
		fields, quoted = append(fields, sb.String()), append(quoted, q)
		if i == len(rec) {
			return fields, quoted, nil
		}
		i++ // the delimiter
	}
}

func (f *fileFormat) decodeJSON(rec []byte) ([]types.Value, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(rec, &obj); err != nil {
		return nil, fmt.Errorf("decoding a json object: %w", err)
	}
	if obj == nil {
		// json.Unmarshal takes a null for an absent object.
		return nil, fmt.Errorf("decoding a json object: the record is null")
	}
	vals := make([]types.Value, len(f.cols))
	for i, c := range f.cols {
		raw, ok := obj[c.Name]
		if !ok && f.failOnMissing {
			return nil, fmt.Errorf("the object has no field '%s'", c.Name)
		}
		text, null, err := jsonText(raw, c)
		if err != nil {
			if !f.ignore {
				return nil, fmt.Errorf("column '%s' (field %d): %w", c.Name, i+1, err)
			}
			null = true
		}
		if vals[i], err = f.value(text, null, i); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// jsonText returns the text of a json field to parse into column c: a
// string's contents, a number's or a boolean's text; an object or array
// only goes into a string column, as its json text.
func jsonText(raw json.RawMessage, c catalog.Column) (text string, null bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		return s, false, nil
	case '{', '[':
		if !c.Type.Kind.IsString() {
			return "", false, fmt.Errorf("a json %s cannot be %s", map[byte]string{'{': "object", '[': "array"}[raw[0]], c.Type.WithNotNull(false))
		}
	}
	if !utf8.Valid(raw) {
		return "", false, fmt.Errorf("invalid UTF-8")
	}
	return string(raw), false, nil
}

// fileSource reads a filesystem table: every file under 'path' (or the
// file it names), parsed in the table's format, at the job's parallelism.
// The offsets of connectors/filesystem's source (file, byte and line of
// each subtask's next record) are the source's checkpointed state, so a
// restored job reads every record after its checkpoint once more.
func (b *builder) fileSource(n *planner.Scan) (clink.Stream[types.Row], error) {
	t := n.Table
	src, f, err := fileRecordSource(t)
	if err != nil {
		return clink.Stream[types.Row]{}, err
	}
	par := b.env.Options().Parallelism
	return clink.FromSource(b.env, n.UID(), par, connector.Source[types.Row](&tableSource{src: src, table: t.Name, rate: f.rate / float64(par)})), nil
}

// fileRecordSource is the connectors/filesystem source of a filesystem
// table's rows, and the table's format.
func fileRecordSource(t *catalog.Table) (*filesystem.Source[types.Row], *fileFormat, error) {
	f, err := newFileFormat(t)
	if err == nil {
		err = f.checkReadable(t.Options["format"])
	}
	if err != nil {
		return nil, nil, err
	}
	// The source frames records as splitCSV reads them.
	rf := filesystem.RecordFormat[types.Row]{Quote: f.quote, Escape: f.escape, Delimiter: f.delim, SkipBlank: true, Decode: f.decode}
	if f.comments {
		rf.Comment = '#'
	}
	if f.json {
		rf = filesystem.RecordFormat[types.Row]{SkipBlank: true, Decode: f.decode}
	}
	src, err := filesystem.NewRecordSource(t.Options["path"], rf)
	if err != nil {
		return nil, nil, fmt.Errorf("table '%s': %w", t.Name, err)
	}
	return src, f, nil
}

// tableSource names its table in read errors and holds each subtask to a
// rate.
type tableSource struct {
	src   connector.Source[types.Row]
	table string
	rate  float64 // rows per second per subtask; 0 unlimited
}

// Open implements connector.Source.
func (s *tableSource) Open(ctx connector.SourceContext, offset []byte, rescaled [][]byte) (connector.SourceReader[types.Row], error) {
	r, err := s.src.Open(ctx, offset, rescaled)
	if err != nil {
		return nil, fmt.Errorf("reading table '%s': %w", s.table, err)
	}
	return &tableReader{SourceReader: r, s: s, start: time.Now()}, nil
}

type tableReader struct {
	connector.SourceReader[types.Row]
	s      *tableSource
	start  time.Time
	served int64
}

// Read implements connector.SourceReader.
func (r *tableReader) Read(n int, emit func(v types.Row, ts int64) error) (connector.ReadStatus, error) {
	if r.s.rate > 0 {
		allowed := int64(time.Since(r.start).Seconds()*r.s.rate) - r.served
		if allowed <= 0 {
			return connector.Idle, nil
		}
		n = int(min(int64(n), allowed))
	}
	st, err := r.SourceReader.Read(n, func(v types.Row, ts int64) error {
		r.served++
		return emit(v, ts)
	})
	if err != nil {
		err = fmt.Errorf("reading table '%s': %w", r.s.table, err)
	}
	return st, err
}
