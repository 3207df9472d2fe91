package filesystem

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Format is a record format of the file connectors.
type Format string

const (
	// CSV writes one record per line with no header, fields separated by
	// commas and quoted as RFC 4180 says (a field holding a comma, a quote
	// or a line break is quoted, quotes doubled). The record type is a
	// struct, whose exported fields are the columns in order, or []string.
	// Struct fields may be strings, bools, integers, floats, []byte
	// (standard base64), time.Time (RFC 3339 with nanoseconds), or types
	// that implement encoding.TextMarshaler and TextUnmarshaler. A reader
	// skips blank lines when the record type is a struct.
	CSV Format = "csv"
	// JSON writes one object per line as encoding/json marshals the
	// record; a reader skips blank lines.
	JSON Format = "json"
)

// Ext returns the file name extension of the format (".csv").
func (f Format) Ext() string { return "." + string(f) }

// codec encodes and decodes records of type T in one format.
type codec[T any] interface {
	// appendRecord appends v and its line terminator to b.
	appendRecord(b []byte, v T) ([]byte, error)
	// decode decodes one record (without its line terminator).
	decode(rec []byte) (T, error)
}

// newCodec checks that T can be written in format f and returns its codec.
func newCodec[T any](f Format) (codec[T], error) {
	switch f {
	case JSON:
		return jsonCodec[T]{}, nil
	case CSV:
		return newCSVCodec[T]()
	case "":
		return nil, fmt.Errorf("no format given (want %q or %q)", CSV, JSON)
	}
	return nil, fmt.Errorf("unknown format %q (want %q or %q)", string(f), CSV, JSON)
}

type jsonCodec[T any] struct{}

func (jsonCodec[T]) appendRecord(b []byte, v T) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return b, fmt.Errorf("encoding json: %w", err)
	}
	b = append(b, data...)
	return append(b, '\n'), nil
}

func (jsonCodec[T]) decode(rec []byte) (T, error) {
	var v T
	if err := json.Unmarshal(rec, &v); err != nil {
		return v, fmt.Errorf("decoding json: %w", err)
	}
	return v, nil
}

// csvField converts one struct field to and from its csv text.
type csvField struct {
	name   string
	index  int
	append func(b []byte, v reflect.Value) ([]byte, error)
	parse  func(s string, v reflect.Value) error
}

// csvCodec writes a struct's exported fields, or a []string, as one csv
// line.
type csvCodec[T any] struct {
	strings bool // T is []string
	fields  []csvField
	// comma is the field delimiter a writer uses (0: ',').
	comma byte
}

func (c *csvCodec[T]) delimiter() byte {
	if c.comma == 0 {
		return ','
	}
	return c.comma
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	bytesType           = reflect.TypeFor[[]byte]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func newCSVCodec[T any]() (codec[T], error) {
	t := reflect.TypeFor[T]()
	if t == reflect.TypeFor[[]string]() {
		return &csvCodec[T]{strings: true}, nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("csv needs a struct or []string record type, not %v", t)
	}
	c := &csvCodec[T]{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		f, err := csvFieldFor(sf)
		if err != nil {
			return nil, fmt.Errorf("csv record type %v: %w", t, err)
		}
		f.index = i
		c.fields = append(c.fields, f)
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("csv record type %v has no exported fields", t)
	}
	return c, nil
}

func csvFieldFor(sf reflect.StructField) (csvField, error) {
	f := csvField{name: sf.Name}
	t := sf.Type
	switch {
	case t == timeType:
		f.append = func(b []byte, v reflect.Value) ([]byte, error) {
			return v.Interface().(time.Time).AppendFormat(b, time.RFC3339Nano), nil
		}
		f.parse = func(s string, v reflect.Value) error {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(tm))
			return nil
		}
		return f, nil
	case t == bytesType:
		f.append = func(b []byte, v reflect.Value) ([]byte, error) {
			return base64.StdEncoding.AppendEncode(b, v.Bytes()), nil
		}
		f.parse = func(s string, v reflect.Value) error {
			data, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return err
			}
			if len(data) == 0 {
				data = nil // an empty column reads as a nil slice
			}
			v.SetBytes(data)
			return nil
		}
		return f, nil
	case t.Implements(textMarshalerType) && reflect.PointerTo(t).Implements(textUnmarshalerType):
		f.append = func(b []byte, v reflect.Value) ([]byte, error) {
			text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
			return append(b, text...), err
		}
		f.parse = func(s string, v reflect.Value) error {
			return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
		}
		return f, nil
	}
	switch t.Kind() {
	case reflect.String:
		f.append = func(b []byte, v reflect.Value) ([]byte, error) { return append(b, v.String()...), nil }
		f.parse = func(s string, v reflect.Value) error { v.SetString(s); return nil }
	case reflect.Bool:
		f.append = func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendBool(b, v.Bool()), nil }
		f.parse = func(s string, v reflect.Value) error {
			x, err := strconv.ParseBool(s)
			v.SetBool(x)
			return err
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		f.append = func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendInt(b, v.Int(), 10), nil }
		f.parse = func(s string, v reflect.Value) error {
			x, err := strconv.ParseInt(s, 10, bits)
			v.SetInt(x)
			return err
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := t.Bits()
		f.append = func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendUint(b, v.Uint(), 10), nil }
		f.parse = func(s string, v reflect.Value) error {
			x, err := strconv.ParseUint(s, 10, bits)
			v.SetUint(x)
			return err
		}
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		f.append = func(b []byte, v reflect.Value) ([]byte, error) {
			return strconv.AppendFloat(b, v.Float(), 'g', -1, bits), nil
		}
		f.parse = func(s string, v reflect.Value) error {
			x, err := strconv.ParseFloat(s, bits)
			v.SetFloat(x)
			return err
		}
	default:
		return f, fmt.Errorf("field %s has type %v, which csv cannot hold", sf.Name, t)
	}
	return f, nil
}

func (c *csvCodec[T]) appendRecord(b []byte, v T) ([]byte, error) {
	comma := c.delimiter()
	if c.strings {
		fields := any(v).([]string)
		for i, s := range fields {
			if i > 0 {
				b = append(b, comma)
			}
			b = appendCSVField(b, s, comma, len(fields) == 1)
		}
		return append(b, '\n'), nil
	}
	rv := reflect.ValueOf(&v).Elem()
	for i, f := range c.fields {
		if i > 0 {
			b = append(b, comma)
		}
		start := len(b)
		var err error
		b, err = f.append(b, rv.Field(f.index))
		if err != nil {
			return b[:start], fmt.Errorf("encoding field %s: %w", f.name, err)
		}
		if needsQuotes(b[start:], comma, len(c.fields) == 1) {
			field := string(b[start:])
			b = appendCSVField(b[:start], field, comma, len(c.fields) == 1)
		}
	}
	return append(b, '\n'), nil
}

// needsQuotes reports whether a field must be quoted: it holds the field
// delimiter comma, a quote or a line break, or starts or ends with a space
// (readers that trim would lose it), or it is the only field of its record
// and empty (an empty line would read as a record with no fields).
func needsQuotes[S ~string | ~[]byte](s S, comma byte, only bool) bool {
	if len(s) == 0 {
		return only
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case comma, '"', '\n', '\r':
			return true
		}
	}
	return false
}

func appendCSVField(b []byte, s string, comma byte, only bool) []byte {
	if !needsQuotes(s, comma, only) {
		return append(b, s...)
	}
	b = append(b, '"')
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			break
		}
		b = append(b, s[:i+1]...)
		b = append(b, '"')
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '"')
}

func (c *csvCodec[T]) decode(rec []byte) (T, error) {
	var v T
	fields, err := splitCSV(rec)
	if err != nil {
		return v, err
	}
	if c.strings {
		return any(fields).(T), nil
	}
	if len(fields) != len(c.fields) {
		return v, fmt.Errorf("record has %d fields, want %d", len(fields), len(c.fields))
	}
	rv := reflect.ValueOf(&v).Elem()
	for i, f := range c.fields {
		if err := f.parse(fields[i], rv.Field(f.index)); err != nil {
			return v, fmt.Errorf("field %d (%s): %w", i+1, f.name, err)
		}
	}
	return v, nil
}

// splitCSV splits one record (without its line terminator; quoted fields
// may hold line breaks) into fields, undoing RFC 4180 quoting. An empty
// record has no fields.
func splitCSV(rec []byte) ([]string, error) {
	if len(rec) == 0 {
		return []string{}, nil
	}
	var fields []string
	i := 0
	for {
		if i < len(rec) && rec[i] == '"' {
			start := i
			var sb strings.Builder
			i++
			for {
				j := bytes.IndexByte(rec[i:], '"')
				if j < 0 {
					return nil, fmt.Errorf("field %d: quoted field opened at byte %d is not closed", len(fields)+1, start+1)
				}
				sb.Write(rec[i : i+j])
				i += j + 1
				if i < len(rec) && rec[i] == '"' {
					sb.WriteByte('"')
					i++
					continue
				}
				break
			}
			fields = append(fields, sb.String())
			if i == len(rec) {
				return fields, nil
			}
			if rec[i] != ',' {
				return nil, fmt.Errorf("field %d: %q after the closing quote at byte %d (want a comma)", len(fields), rec[i], i+1)
			}
			i++
			continue
		}
		j := bytes.IndexByte(rec[i:], ',')
		end := len(rec)
		if j >= 0 {
			end = i + j
		}
		f := rec[i:end]
		if k := bytes.IndexByte(f, '"'); k >= 0 {
			return nil, fmt.Errorf("field %d: bare quote at byte %d in an unquoted field", len(fields)+1, i+k+1)
		}
		fields = append(fields, string(f))
		if j < 0 {
			return fields, nil
		}
		i = end + 1
	}
}
