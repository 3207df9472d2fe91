// Package parquet owns clink's exactly-once Parquet sink: it writes Go
// structs as Parquet files (through apache/arrow-go's pqarrow writer) and
// publishes them by the staging rules of connectors/filesystem, whose
// PartFiles and Publisher it reuses.
//
// Every committed file is a complete Parquet file with its footer and the
// Arrow schema in its metadata, fsynced before its handle is returned at the
// barrier. The committed output of a directory is every file in it whose
// name does not start with "." or "_".
//
// The schema comes from the record struct's exported fields, in order: bool,
// signed and unsigned integers (int and uint as 64 bits), float32, float64,
// string, []byte and time.Time (a UTC timestamp in microseconds; finer
// digits are truncated). Columns are required (not nullable). A field tag
// `parquet:"name"` renames a column and `parquet:"-"` leaves the field out.
package parquet

import (
	"bufio"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// Ext is the name extension of the files the sink commits.
const Ext = ".parquet"

// Options configures NewSink. The zero value is valid.
type Options struct {
	// Prefix starts the name of every committed file (default "part"). It
	// must not start with "." or "_".
	Prefix string
	// RowGroupRows is the number of rows per row group (default 65536).
	// The rows of a row group are held in memory until it is written.
	RowGroupRows int
	// Compression is "snappy" (default), "zstd", "gzip" or "none".
	Compression string
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Prefix == "" {
		o.Prefix = "part"
	}
	if o.RowGroupRows < 0 {
		return fmt.Errorf("negative row group size %d", o.RowGroupRows)
	}
	if o.RowGroupRows == 0 {
		o.RowGroupRows = 64 << 10
	}
	if o.Compression == "" {
		o.Compression = "snappy"
	}
	if _, ok := codecs[o.Compression]; !ok {
		return fmt.Errorf("unknown compression %q (want snappy, zstd, gzip or none)", o.Compression)
	}
	return nil
}

var codecs = map[string]compress.Compression{
	"snappy": compress.Codecs.Snappy,
	"zstd":   compress.Codecs.Zstd,
	"gzip":   compress.Codecs.Gzip,
	"none":   compress.Codecs.Uncompressed,
}

// NewSink returns the factory of an exactly-once sink that writes records
// of struct type T as Parquet files to the directory path (created if
// missing), for clink.CommitTo. It derives the schema from T and checks the
// options now, so that a job is refused before it runs.
func NewSink[T any](path string, opts Options) (func() connector.CommittingSink[T, filesystem.Committable], error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("parquet sink %s: %w", path, err)
	}
	sc, err := schemaOf[T]()
	if err != nil {
		return nil, fmt.Errorf("parquet sink %s: %w", path, err)
	}
	parts, err := filesystem.NewPartFiles(path, opts.Prefix, Ext)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	dir := parts.Dir()
	return func() connector.CommittingSink[T, filesystem.Committable] {
		p, _ := filesystem.NewPartFiles(dir, opts.Prefix, Ext)
		return &Sink[T]{schema: sc, parts: p, opts: opts}
	}, nil
}

// Sink is one subtask of the exactly-once Parquet sink (see NewSink). Its
// methods are called by connector.Committer; Commit, Abort and the handle
// codec are filesystem.Publisher's.
type Sink[T any] struct {
	filesystem.Publisher
	schema *schema
	parts  *filesystem.PartFiles
	opts   Options
	ctx    connector.InitContext[filesystem.Committable]

	// Per open file: the buffered file, the Parquet writer, the builder of
	// the current row group and the rows written to the file.
	buf  *bufio.Writer
	fw   *pqarrow.FileWriter
	rb   *array.RecordBuilder
	rows int64
}

// Open implements connector.CommittingSink.
func (s *Sink[T]) Open(ctx connector.InitContext[filesystem.Committable]) error {
	s.ctx = ctx
	return s.parts.Open(ctx)
}

// Write implements connector.CommittingSink: it appends v to the current
// row group and writes the group out when it is full.
func (s *Sink[T]) Write(v T) error {
	if s.fw == nil {
		if err := s.create(); err != nil {
			return err
		}
	}
	s.schema.append(s.rb, reflect.ValueOf(&v).Elem())
	s.rows++
	if s.rb.Field(0).Len() >= s.opts.RowGroupRows {
		return s.flushRowGroup()
	}
	return nil
}

func (s *Sink[T]) create() (err error) {
	f, err := s.parts.Create()
	if err != nil {
		return err
	}
	if s.buf == nil {
		s.buf = bufio.NewWriterSize(f, 256<<10)
	} else {
		s.buf.Reset(f)
	}
	defer s.guard("creating the Parquet writer of", &err)
	props := pq.NewWriterProperties(
		pq.WithCompression(codecs[s.opts.Compression]),
		pq.WithMaxRowGroupLength(int64(s.opts.RowGroupRows)),
		pq.WithCreatedBy("clink"),
	)
	// The writer sees only the buffer, which has no Close: the file is
	// closed by PartFiles, after its fsync.
	fw, err := pqarrow.NewFileWriter(s.schema.arrow, s.buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return fmt.Errorf("creating the Parquet writer of %s: %w", s.parts.Path(), err)
	}
	s.fw, s.rows = fw, 0
	if s.rb == nil {
		s.rb = array.NewRecordBuilder(memory.DefaultAllocator, s.schema.arrow)
	}
	return nil
}

// guard turns a panic of the Parquet library into an error naming the
// file, so that none reaches the job's user.
func (s *Sink[T]) guard(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s %s: the Parquet writer panicked: %v", what, s.parts.Path(), r)
	}
}

// flushRowGroup writes the rows built so far as one row group.
func (s *Sink[T]) flushRowGroup() (err error) {
	if s.rb.Field(0).Len() == 0 {
		return nil
	}
	defer s.guard("writing a row group of", &err)
	rec := s.rb.NewRecordBatch()
	defer rec.Release()
	if err := s.fw.Write(rec); err != nil {
		return fmt.Errorf("writing a row group of %d rows to %s (after row %d): %w", rec.NumRows(), s.parts.Path(), s.rows-rec.NumRows(), err)
	}
	return nil
}

// PrepareCommit implements connector.CommittingSink: it writes the last row
// group and the footer, fsyncs and closes the file and stages it.
func (s *Sink[T]) PrepareCommit(ckpt checkpoint.ID) (filesystem.Committable, bool, error) {
	if s.fw != nil {
		if err := s.finish(); err != nil {
			return filesystem.Committable{}, false, err
		}
	}
	return s.parts.Stage(s.ctx.StageName(ckpt))
}

func (s *Sink[T]) finish() (err error) {
	if err := s.flushRowGroup(); err != nil {
		return err
	}
	fw := s.fw
	s.fw = nil
	if err := s.closeWriter(fw); err != nil {
		return err
	}
	if err := s.buf.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", s.parts.Path(), err)
	}
	s.buf.Reset(nil)
	return s.parts.Finish()
}

func (s *Sink[T]) closeWriter(fw *pqarrow.FileWriter) (err error) {
	defer s.guard("writing the footer of", &err)
	if err := fw.Close(); err != nil {
		return fmt.Errorf("writing the footer of %s after %d rows: %w", s.parts.Path(), s.rows, err)
	}
	return nil
}

// Close implements connector.CommittingSink: what was written but not
// staged is removed.
func (s *Sink[T]) Close() error {
	if s.rb != nil {
		s.rb.Release()
		s.rb = nil
	}
	s.fw = nil
	if s.buf != nil {
		s.buf.Reset(nil)
	}
	return s.parts.Discard()
}

// column appends one struct field to its builder.
type column struct {
	index  int
	append func(b array.Builder, v reflect.Value)
}

// schema is the Arrow schema of a record struct and how to fill it.
type schema struct {
	arrow   *arrow.Schema
	columns []column
}

func (sc *schema) append(rb *array.RecordBuilder, v reflect.Value) {
	for i, c := range sc.columns {
		c.append(rb.Field(i), v.Field(c.index))
	}
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

// schemaOf derives the schema of struct type T.
func schemaOf[T any]() (*schema, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("the record type must be a struct, not %v", t)
	}
	sc := &schema{}
	var fields []arrow.Field
	seen := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := sf.Name
		if tag, ok := sf.Tag.Lookup("parquet"); ok {
			tag, _, _ = strings.Cut(tag, ",")
			if tag == "-" {
				continue
			}
			if tag != "" {
				name = tag
			}
		}
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("record type %v: fields %s and %s are both column %q", t, prev, sf.Name, name)
		}
		seen[name] = sf.Name
		dt, app, err := columnFor(sf.Type)
		if err != nil {
			return nil, fmt.Errorf("record type %v: field %s: %w", t, sf.Name, err)
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt})
		sc.columns = append(sc.columns, column{index: i, append: app})
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("record type %v has no exported fields", t)
	}
	sc.arrow = arrow.NewSchema(fields, nil)
	return sc, nil
}

func columnFor(t reflect.Type) (arrow.DataType, func(array.Builder, reflect.Value), error) {
	switch t {
	case timeType:
		return arrow.FixedWidthTypes.Timestamp_us, func(b array.Builder, v reflect.Value) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.Interface().(time.Time).UnixMicro()))
		}, nil
	case bytesType:
		return arrow.BinaryTypes.Binary, func(b array.Builder, v reflect.Value) {
			b.(*array.BinaryBuilder).Append(v.Bytes())
		}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return arrow.FixedWidthTypes.Boolean, func(b array.Builder, v reflect.Value) { b.(*array.BooleanBuilder).Append(v.Bool()) }, nil
	case reflect.Int8:
		return arrow.PrimitiveTypes.Int8, func(b array.Builder, v reflect.Value) { b.(*array.Int8Builder).Append(int8(v.Int())) }, nil
	case reflect.Int16:
		return arrow.PrimitiveTypes.Int16, func(b array.Builder, v reflect.Value) { b.(*array.Int16Builder).Append(int16(v.Int())) }, nil
	case reflect.Int32:
		return arrow.PrimitiveTypes.Int32, func(b array.Builder, v reflect.Value) { b.(*array.Int32Builder).Append(int32(v.Int())) }, nil
	case reflect.Int, reflect.Int64:
		return arrow.PrimitiveTypes.Int64, func(b array.Builder, v reflect.Value) { b.(*array.Int64Builder).Append(v.Int()) }, nil
	case reflect.Uint8:
		return arrow.PrimitiveTypes.Uint8, func(b array.Builder, v reflect.Value) { b.(*array.Uint8Builder).Append(uint8(v.Uint())) }, nil
	case reflect.Uint16:
		return arrow.PrimitiveTypes.Uint16, func(b array.Builder, v reflect.Value) { b.(*array.Uint16Builder).Append(uint16(v.Uint())) }, nil
	case reflect.Uint32:
		return arrow.PrimitiveTypes.Uint32, func(b array.Builder, v reflect.Value) { b.(*array.Uint32Builder).Append(uint32(v.Uint())) }, nil
	case reflect.Uint, reflect.Uint64:
		return arrow.PrimitiveTypes.Uint64, func(b array.Builder, v reflect.Value) { b.(*array.Uint64Builder).Append(v.Uint()) }, nil
	case reflect.Float32:
		return arrow.PrimitiveTypes.Float32, func(b array.Builder, v reflect.Value) { b.(*array.Float32Builder).Append(float32(v.Float())) }, nil
	case reflect.Float64:
		return arrow.PrimitiveTypes.Float64, func(b array.Builder, v reflect.Value) { b.(*array.Float64Builder).Append(v.Float()) }, nil
	case reflect.String:
		return arrow.BinaryTypes.String, func(b array.Builder, v reflect.Value) { b.(*array.StringBuilder).Append(v.String()) }, nil
	}
	return nil, nil, fmt.Errorf("type %v has no Parquet column type here (want bool, an integer, a float, string, []byte or time.Time)", t)
}
