package exec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/types"
)

// filesystemConnector writes csv or json lines through the two-phase-commit
// file sink of connectors/filesystem: output appears when a checkpoint
// completes, exactly once. It is append-only, as Flink's filesystem sink
// is for a streaming query.
func filesystemConnector() *catalog.Connector {
	return &catalog.Connector{
		Name: "filesystem", Sink: true, TwoPhaseCommit: true,
		Options: map[string]string{
			"path":   "directory of the committed files (required)",
			"format": "csv (no header, RFC 4180 quoting) or json (one object per line)",
		},
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
			return nil
		},
	}
}

func fileSink(in clink.Stream[types.Row], uid string, t *catalog.Table) error {
	path := t.Options["path"]
	switch t.Options["format"] {
	case "csv":
		f, err := filesystem.NewSink[[]string](path, filesystem.CSV, filesystem.SinkOptions{})
		if err != nil {
			return fmt.Errorf("table '%s': %w", t.Name, err)
		}
		lines := clink.Map(in, uid+".csv", func(r types.Row) []string {
			out := make([]string, len(r.Values))
			for i, v := range r.Values {
				if !v.IsNull() {
					out[i] = string(v.AppendFormat(nil, time.UTC))
				}
			}
			return out
		})
		clink.CommitTo(lines, uid, f)
	default:
		f, err := filesystem.NewSink[jsonRow](path, filesystem.JSON, filesystem.SinkOptions{})
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
