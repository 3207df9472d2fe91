package exec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// filesystemConnector writes csv or json lines through the two-phase-commit
// file sink of connectors/filesystem: output appears when a checkpoint
// completes, exactly once. It is append-only, as Flink's filesystem sink
// is for a streaming query.
func filesystemConnector() *catalog.Connector {
	opts := map[string]string{
		"path":   "directory of the committed files (required)",
		"format": "csv (no header, RFC 4180 quoting) or json (one object per line)",
	}
	for k, v := range fileSinkOptions {
		opts[k] = v
	}
	return &catalog.Connector{
		Name: "filesystem", Sink: true, TwoPhaseCommit: true,
		Options: opts,
		Validate: func(t *catalog.Table) error {
			if t.Options["path"] == "" {
				return &types.Error{Pos: t.Pos, Msg: fmt.Sprintf("table '%s' needs the option 'path'", t.Name)}
			}
			switch f := t.Options["format"]; f {
			case "csv", "json":
			case "":
				return &types.Error{Pos: t.Pos, Msg: fmt.Sprintf("table '%s' needs the option 'format' ('csv' or 'json')", t.Name)}
			default:
				return &types.Error{Pos: t.OptionPosition("format"), Msg: fmt.Sprintf("option 'format' must be 'csv' or 'json', got '%s'", f)}
			}
			_, err := fileSinkConfig(t)
			return err
		},
	}
}

// fileSinkOptions are the filesystem sink's options beyond path and
// format, with Flink's names.
var fileSinkOptions = map[string]string{
	"sink.rolling-policy.file-size":           "start a new part file once one holds this many bytes ('128MB', '1 kb'); files also roll at every checkpoint",
	"sink.rolling-policy.rollover-interval":   "accepted and checked; part files roll at every checkpoint, when their rows become visible",
	"sink.rolling-policy.check-interval":      "accepted and checked; part files roll at every checkpoint",
	"sink.rolling-policy.inactivity-interval": "accepted and checked; part files roll at every checkpoint",
	"sink.parallelism":                        "parallelism of the sink (default: that of its input)",
	"csv.field-delimiter":                     "the one character between csv fields (default ','; '\\t' for a tab)",
	"csv.null-literal":                        "the csv text of NULL (default: an empty field)",
}

// fileSinkSettings are a filesystem table's sink options, checked.
type fileSinkSettings struct {
	sink      filesystem.SinkOptions
	nullText  string
	partition int // sink.parallelism, 0 when not set
}

// fileSinkConfig reads and checks the sink options of a filesystem
// table; an error names the option and where it was written.
func fileSinkConfig(t *catalog.Table) (fileSinkSettings, error) {
	var c fileSinkSettings
	bad := func(key, format string, args ...any) error {
		return &types.Error{Pos: t.OptionPosition(key), Msg: fmt.Sprintf("table '%s': option '%s' %s", t.Name, key, fmt.Sprintf(format, args...))}
	}
	format := t.Options["format"]
	for key := range t.Options {
		if strings.HasPrefix(key, "csv.") && format != "csv" {
			return c, bad(key, "applies to the format 'csv', not '%s'", format)
		}
	}
	if v, ok := t.Options["sink.rolling-policy.file-size"]; ok {
		n, err := parseMemorySize(v)
		if err != nil || n <= 0 {
			return c, bad("sink.rolling-policy.file-size", "must be a positive memory size such as '128MB', got '%s'", v)
		}
		c.sink.RollSize = n
	}
	for _, key := range []string{"sink.rolling-policy.rollover-interval", "sink.rolling-policy.check-interval", "sink.rolling-policy.inactivity-interval"} {
		if v, ok := t.Options[key]; ok {
			if d, err := parseFlinkDuration(v); err != nil || d <= 0 {
				return c, bad(key, "must be a positive duration such as '30 min', got '%s'", v)
			}
		}
	}
	if err := parallelismOption(t, "sink.parallelism"); err != nil {
		return c, err
	}
	if v, ok := t.Options["sink.parallelism"]; ok {
		c.partition, _ = strconv.Atoi(v)
	}
	if v, ok := t.Options["csv.field-delimiter"]; ok {
		d := v
		if d == `\t` {
			d = "\t"
		}
		if len(d) != 1 || d[0] >= 0x80 || d[0] == '"' || d[0] == '\n' || d[0] == '\r' {
			return c, bad("csv.field-delimiter", "must be one ASCII character other than a quote or a line break, got '%s'", v)
		}
		c.sink.CSVDelimiter = d[0]
	}
	c.nullText = t.Options["csv.null-literal"]
	return c, nil
}

// parseMemorySize reads a Flink memory size: a number and an optional
// unit (b, k/kb, m/mb, g/gb, t/tb; binary multiples, as Flink's
// MemorySize).
func parseMemorySize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, err
	}
	mult := map[string]int64{"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
		"t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40}[unit]
	if mult == 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("bad memory size %q", s)
	}
	return n * mult, nil
}

// parseFlinkDuration reads a Flink duration: a number and an optional
// unit (ms, s, min, h, d and their long forms); a bare number is
// milliseconds.
func parseFlinkDuration(s string) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, err
	}
	u, ok := map[string]time.Duration{
		"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}[unit]
	if !ok || n > int64(math.MaxInt64/u) {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return time.Duration(n) * u, nil
}

// withSinkParallelism runs a sink's input at its sink.parallelism, if the
// table sets one. An insert-only query's rows are spread round-robin over
// the sink's subtasks. An updating query needs the table's PRIMARY KEY, as
// in Flink: its rows are hash-partitioned by that key, so every change of
// one key reaches one subtask in order; without a key it is refused.
func withSinkParallelism(in clink.Stream[types.Row], n *planner.Sink) (clink.Stream[types.Row], error) {
	t := n.Table
	v, ok := t.Options["sink.parallelism"]
	if !ok {
		return in, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 {
		return in, &types.Error{Pos: t.OptionPosition("sink.parallelism"), Msg: fmt.Sprintf("option 'sink.parallelism' must be a positive integer, got '%s'", v)}
	}
	if !n.Input.Updating() {
		rows := clink.Map(in, n.UID()+".parallelism", func(r types.Row) types.Row { return r })
		return clink.Rebalance(rows).SetParallelism(p), nil
	}
	if len(t.PrimaryKey) == 0 {
		return in, &types.Error{Pos: t.OptionPosition("sink.parallelism"), Msg: fmt.Sprintf(
			"table '%s' sets 'sink.parallelism', but the query produces update changes and the table has no PRIMARY KEY to distribute them by: the rows of one key could be reordered across the sink's subtasks; declare a PRIMARY KEY or remove the option", t.Name)}
	}
	keyIdx := make([]int, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		keyIdx[i] = slices.IndexFunc(t.Physical(), func(c catalog.Column) bool { return c.Name == k })
	}
	keyed := clink.KeyBy(in, func(r types.Row) string {
		var k []byte
		for _, i := range keyIdx {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	})
	return clink.Process(keyed, n.UID()+".parallelism", func(_ *clink.KeyedContext[string, struct{}], r types.Row, out *clink.Collector[types.Row]) error {
		out.Collect(r)
		return nil
	}).SetParallelism(p), nil
}

func fileSink(in clink.Stream[types.Row], n *planner.Sink) error {
	t, uid := n.Table, n.UID()
	cfg, err := fileSinkConfig(t)
	if err != nil {
		return err
	}
	if in, err = withSinkParallelism(in, n); err != nil {
		return err
	}
	path := t.Options["path"]
	switch t.Options["format"] {
	case "csv":
		f, err := filesystem.NewSink[[]string](path, filesystem.CSV, cfg.sink)
		if err != nil {
			return fmt.Errorf("table '%s': %w", t.Name, err)
		}
		null := cfg.nullText
		lines := clink.Map(in, uid+".csv", func(r types.Row) []string {
			out := make([]string, len(r.Values))
			for i, v := range r.Values {
				if v.IsNull() {
					out[i] = null
				} else {
					out[i] = string(v.AppendFormat(nil, time.UTC))
				}
			}
			return out
		})
		clink.CommitTo(lines, uid, f)
	default:
		f, err := filesystem.NewSink[jsonRow](path, filesystem.JSON, cfg.sink)
		if err != nil {
			return fmt.Errorf("table '%s': %w", t.Name, err)
		}
		var names []string
		for _, c := range t.Physical() {
			names = append(names, c.Name)
		}
		objs := clink.Map(in, uid+".json", func(r types.Row) jsonRow {
			return jsonRow{Line: appendJSON(nil, names, r.Values)}
		})
		clink.CommitTo(objs, uid, f)
	}
	return nil
}

// jsonRow is one row encoded as a json object, written as is.
type jsonRow struct {
	Line []byte
}

// MarshalJSON implements json.Marshaler.
func (r jsonRow) MarshalJSON() ([]byte, error) { return r.Line, nil }

// appendJSON writes a row as Flink's json format does: numbers and
// booleans bare, NULL as null, everything else as its SQL text.
func appendJSON(b []byte, names []string, vals []types.Value) []byte {
	b = append(b, '{')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(names[i])
		b = append(b, k...)
		b = append(b, ':')
		switch {
		case v.IsNull():
			b = append(b, "null"...)
		case v.Kind() == types.KindBoolean:
			b = strconv.AppendBool(b, v.Bool())
		case v.Kind().IsInteger(), v.Kind() == types.KindDecimal:
			b = v.AppendFormat(b, time.UTC)
		case v.Kind().IsApprox():
			f := v.Float64()
			if f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
				s, _ := json.Marshal(v.String())
				b = append(b, s...)
			} else {
				b = strconv.AppendFloat(b, f, 'g', -1, 64)
			}
		default:
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(string(v.AppendFormat(nil, time.UTC)))
			b = append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
		}
	}
	return append(b, '}')
}
