package state

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"unsafe"
)

// reflectCodec encodes any type built from booleans, numbers, strings,
// slices, arrays, maps, pointers and structs (exported and unexported
// fields alike), and types that implement encoding.BinaryMarshaler and
// encoding.BinaryUnmarshaler (time.Time, for one). The encoder of a type is
// compiled once. Floats keep their exact bits, NaN and infinities included.
type reflectCodec[T any] struct {
	enc encFn
	dec decFn
}

type encFn func(dst []byte, v reflect.Value) []byte
type decFn func(src []byte, v reflect.Value, a *byteArena) (int, error)

var (
	binaryMarshaler   = reflect.TypeFor[encoding.BinaryMarshaler]()
	binaryUnmarshaler = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	// compiled holds the finished encoders by reflect.Type.
	compiled sync.Map
	// compileMu serialises compilation; building is guarded by it.
	compileMu sync.Mutex
	building  = map[reflect.Type]*compiledType{}
)

type compiledType struct {
	enc encFn
	dec decFn
	err error
}

// CheckCodec reports whether values of type T can be encoded by the codec
// CodecFor returns, naming the part of the type that cannot (a func, a
// channel, an interface).
func CheckCodec[T any]() error {
	_, err := compile(reflect.TypeFor[T]())
	return err
}

func newReflectCodec[T any]() Codec[T] {
	c, err := compile(reflect.TypeFor[T]())
	if err != nil {
		return unsupportedCodec[T]{err: err}
	}
	return reflectCodec[T]{enc: c.enc, dec: c.dec}
}

func (c reflectCodec[T]) Append(dst []byte, v T) []byte {
	return c.enc(dst, reflect.ValueOf(&v).Elem())
}

// appendFrom is Append of the value v points to, which it only reads:
// Append's argument escapes, one allocation a call, where a table's
// entries are in its arrays already.
func (c reflectCodec[T]) appendFrom(dst []byte, v *T) []byte {
	return c.enc(dst, reflect.ValueOf(v).Elem())
}

// appenderOf returns c's Append of the value a pointer points to, which
// does not copy it for the reflection codec (appendFrom).
func appenderOf[T any](c Codec[T]) func(dst []byte, v *T) []byte {
	if a, ok := c.(interface{ appendFrom([]byte, *T) []byte }); ok {
		return a.appendFrom
	}
	return func(dst []byte, v *T) []byte { return c.Append(dst, *v) }
}

// NewDecoder implements RunDecoder: the strings and byte slices of the
// values it decodes take their bytes from one byteArena.
func (c reflectCodec[T]) NewDecoder() func(src []byte) (T, int, error) {
	a := &byteArena{}
	return func(src []byte) (T, int, error) {
		var v T
		n, err := c.dec(src, reflect.ValueOf(&v).Elem(), a)
		return v, n, err
	}
}

func (c reflectCodec[T]) Decode(src []byte) (T, int, error) {
	var v T
	n, err := c.dec(src, reflect.ValueOf(&v).Elem(), nil)
	return v, n, err
}

// unsupportedCodec stands for a type that cannot be encoded. Using it is a
// programming error the plan should have refused (see CheckCodec).
type unsupportedCodec[T any] struct{ err error }

// codecError returns why c cannot encode its type: the error of a codec
// CodecFor could not build, nil for any other codec (a caller's own).
func codecError[T any](c Codec[T]) error {
	if u, ok := c.(unsupportedCodec[T]); ok {
		return u.err
	}
	return nil
}

func (c unsupportedCodec[T]) Append([]byte, T) []byte { panic(c.err.Error()) }
func (c unsupportedCodec[T]) Decode([]byte) (T, int, error) {
	var v T
	return v, 0, c.err
}

func compile(t reflect.Type) (*compiledType, error) {
	if c, ok := compiled.Load(t); ok {
		ct := c.(*compiledType)
		return ct, ct.err
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	if c, ok := compiled.Load(t); ok {
		ct := c.(*compiledType)
		return ct, ct.err
	}
	ct := &compiledType{}
	// Types being compiled are found by lazy through building, so that a
	// recursive type (a struct holding a pointer to itself) terminates.
	building[t] = ct
	enc, dec, err := build(t, t.String())
	delete(building, t)
	ct.enc, ct.dec, ct.err = enc, dec, err
	compiled.Store(t, ct)
	return ct, err
}

func short(what string) error { return fmt.Errorf("decoding %s: %w", what, ErrShortBuffer) }

func build(t reflect.Type, path string) (encFn, decFn, error) {
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(binaryUnmarshaler) &&
		(t.Implements(binaryMarshaler) || reflect.PointerTo(t).Implements(binaryMarshaler)) {
		return buildBinaryMarshaler(t, path)
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(dst []byte, v reflect.Value) []byte {
				if v.Bool() {
					return append(dst, 1)
				}
				return append(dst, 0)
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				if len(src) < 1 {
					return 0, short(path)
				}
				if src[0] > 1 {
					return 0, fmt.Errorf("decoding %s: invalid bool byte %#x", path, src[0])
				}
				v.SetBool(src[0] == 1)
				return 1, nil
			}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(dst []byte, v reflect.Value) []byte { return binary.AppendVarint(dst, v.Int()) },
			func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				x, n := binary.Varint(src)
				if n <= 0 {
					return 0, short(path)
				}
				if v.OverflowInt(x) {
					return 0, fmt.Errorf("decoding %s: %d overflows %s", path, x, v.Type())
				}
				v.SetInt(x)
				return n, nil
			}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(dst []byte, v reflect.Value) []byte { return binary.AppendUvarint(dst, v.Uint()) },
			func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				x, n := binary.Uvarint(src)
				if n <= 0 {
					return 0, short(path)
				}
				if v.OverflowUint(x) {
					return 0, fmt.Errorf("decoding %s: %d overflows %s", path, x, v.Type())
				}
				v.SetUint(x)
				return n, nil
			}, nil
	case reflect.Float32:
		return func(dst []byte, v reflect.Value) []byte {
				f := float32(v.Float())
				if v.CanAddr() {
					f = *(*float32)(unsafe.Pointer(v.UnsafeAddr()))
				}
				return binary.LittleEndian.AppendUint64(dst, float32To64Bits(f))
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				if len(src) < 8 {
					return 0, short(path)
				}
				*(*float32)(unsafe.Pointer(v.UnsafeAddr())) = float32From64Bits(binary.LittleEndian.Uint64(src))
				return 8, nil
			}, nil
	case reflect.Float64:
		return func(dst []byte, v reflect.Value) []byte {
				return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Float()))
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				if len(src) < 8 {
					return 0, short(path)
				}
				v.SetFloat(math.Float64frombits(binary.LittleEndian.Uint64(src)))
				return 8, nil
			}, nil
	case reflect.Complex64, reflect.Complex128:
		return func(dst []byte, v reflect.Value) []byte {
				c := v.Complex()
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(real(c)))
				return binary.LittleEndian.AppendUint64(dst, math.Float64bits(imag(c)))
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				if len(src) < 16 {
					return 0, short(path)
				}
				v.SetComplex(complex(math.Float64frombits(binary.LittleEndian.Uint64(src)),
					math.Float64frombits(binary.LittleEndian.Uint64(src[8:]))))
				return 16, nil
			}, nil
	case reflect.String:
		return func(dst []byte, v reflect.Value) []byte {
				s := v.String()
				dst = binary.AppendUvarint(dst, uint64(len(s)))
				return append(dst, s...)
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				l, n := binary.Uvarint(src)
				if n <= 0 || l > uint64(len(src)-n) {
					return 0, short(path)
				}
				v.SetString(a.string(src[n : n+int(l)]))
				return n + int(l), nil
			}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(dst []byte, v reflect.Value) []byte {
					if v.IsNil() {
						return append(dst, 0)
					}
					b := v.Bytes()
					dst = binary.AppendUvarint(dst, uint64(len(b))+1)
					return append(dst, b...)
				}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
					l, n := binary.Uvarint(src)
					if n <= 0 || (l > 0 && l-1 > uint64(len(src)-n)) {
						return 0, short(path)
					}
					if l == 0 {
						v.SetZero()
						return n, nil
					}
					v.SetBytes(a.bytes(src[n : n+int(l-1)]))
					return n + int(l-1), nil
				}, nil
		}
		ee, ed, err := lazy(t.Elem(), path+"[]")
		if err != nil {
			return nil, nil, err
		}
		return func(dst []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(dst, 0)
				}
				dst = binary.AppendUvarint(dst, uint64(v.Len())+1)
				for i := 0; i < v.Len(); i++ {
					dst = ee(dst, v.Index(i))
				}
				return dst
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				l, n := binary.Uvarint(src)
				if n <= 0 {
					return 0, short(path)
				}
				if l == 0 {
					v.SetZero()
					return n, nil
				}
				// Every element takes at least one byte: bound the
				// allocation by the input.
				if zeroSize := t.Elem().Size() == 0; (!zeroSize && l-1 > uint64(len(src)-n)) || (zeroSize && l-1 > math.MaxInt32) {
					return 0, fmt.Errorf("decoding %s: %d elements in %d bytes: %w", path, l-1, len(src)-n, ErrShortBuffer)
				}
				s := reflect.MakeSlice(t, int(l-1), int(l-1))
				for i := 0; i < int(l-1); i++ {
					k, err := ed(src[n:], s.Index(i), a)
					if err != nil {
						return 0, err
					}
					n += k
				}
				v.Set(s)
				return n, nil
			}, nil
	case reflect.Array:
		ee, ed, err := lazy(t.Elem(), path+"[i]")
		if err != nil {
			return nil, nil, err
		}
		return func(dst []byte, v reflect.Value) []byte {
				for i := 0; i < v.Len(); i++ {
					dst = ee(dst, v.Index(i))
				}
				return dst
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				n := 0
				for i := 0; i < v.Len(); i++ {
					k, err := ed(src[n:], v.Index(i), a)
					if err != nil {
						return 0, err
					}
					n += k
				}
				return n, nil
			}, nil
	case reflect.Map:
		ke, kd, err := lazy(t.Key(), path+"[key]")
		if err != nil {
			return nil, nil, err
		}
		ve, vd, err := lazy(t.Elem(), path+"[value]")
		if err != nil {
			return nil, nil, err
		}
		return func(dst []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(dst, 0)
				}
				dst = binary.AppendUvarint(dst, uint64(v.Len())+1)
				// Encode every entry on its own and write them ordered by
				// key bytes, so that equal maps give equal bytes. Keys and
				// values are copied into addressable variables so that
				// unexported fields and pointer-receiver marshalers in them
				// can be reached.
				type entry struct{ k, kv []byte }
				entries := make([]entry, 0, v.Len())
				k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
				it := v.MapRange()
				for it.Next() {
					k.SetIterKey(it)
					e.SetIterValue(it)
					kb := ke(nil, k)
					entries = append(entries, entry{k: kb, kv: ve(kb, e)})
				}
				slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
				for _, en := range entries {
					dst = append(dst, en.kv...)
				}
				return dst
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				l, n := binary.Uvarint(src)
				if n <= 0 {
					return 0, short(path)
				}
				if l == 0 {
					v.SetZero()
					return n, nil
				}
				if l-1 > uint64(len(src)-n) {
					return 0, fmt.Errorf("decoding %s: %d entries in %d bytes: %w", path, l-1, len(src)-n, ErrShortBuffer)
				}
				m := reflect.MakeMapWithSize(t, int(l-1))
				k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
				for i := 0; i < int(l-1); i++ {
					k.SetZero()
					e.SetZero()
					c, err := kd(src[n:], k, a)
					if err != nil {
						return 0, err
					}
					n += c
					if c, err = vd(src[n:], e, a); err != nil {
						return 0, err
					}
					n += c
					m.SetMapIndex(k, e)
				}
				v.Set(m)
				return n, nil
			}, nil
	case reflect.Pointer:
		ee, ed, err := lazy(t.Elem(), "*"+path)
		if err != nil {
			return nil, nil, err
		}
		return func(dst []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(dst, 0)
				}
				return ee(append(dst, 1), v.Elem())
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				if len(src) < 1 {
					return 0, short(path)
				}
				if src[0] == 0 {
					v.SetZero()
					return 1, nil
				}
				p := reflect.New(t.Elem())
				n, err := ed(src[1:], p.Elem(), a)
				if err != nil {
					return 0, err
				}
				v.Set(p)
				return n + 1, nil
			}, nil
	case reflect.Struct:
		type field struct {
			index int
			enc   encFn
			dec   decFn
		}
		var fields []field
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fe, fd, err := lazy(f.Type, path+"."+f.Name)
			if err != nil {
				return nil, nil, err
			}
			fields = append(fields, field{index: i, enc: fe, dec: fd})
		}
		return func(dst []byte, v reflect.Value) []byte {
				for _, f := range fields {
					fv := v.Field(f.index)
					if !fv.CanInterface() && fv.CanAddr() {
						fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
					}
					dst = f.enc(dst, fv)
				}
				return dst
			}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
				n := 0
				for _, f := range fields {
					fv := v.Field(f.index)
					if !fv.CanSet() {
						// Unexported field: v is addressable (decoders
						// always write into a new value), so reach it
						// through its address.
						fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
					}
					k, err := f.dec(src[n:], fv, a)
					if err != nil {
						return 0, err
					}
					n += k
				}
				return n, nil
			}, nil
	}
	return nil, nil, fmt.Errorf("type %s cannot be encoded: %s is a %s (give the stream a type of data fields only)", path, t, t.Kind())
}

// lazy returns the encoder of t, a part of a type being compiled (so
// compileMu is held). A type already being compiled further up is called
// through its entry, which is filled in by the time anything is encoded.
func lazy(t reflect.Type, path string) (encFn, decFn, error) {
	ct, ok := building[t]
	if !ok {
		if c, done := compiled.Load(t); done && c.(*compiledType).err == nil {
			ct, ok = c.(*compiledType), true
		}
	}
	if ok {
		if ct.err != nil {
			return nil, nil, ct.err
		}
		return func(dst []byte, v reflect.Value) []byte { return ct.enc(dst, v) },
			func(src []byte, v reflect.Value, a *byteArena) (int, error) { return ct.dec(src, v, a) }, nil
	}
	building[t] = &compiledType{}
	enc, dec, err := build(t, path)
	ct = building[t]
	delete(building, t)
	ct.enc, ct.dec, ct.err = enc, dec, err
	return enc, dec, err
}

func buildBinaryMarshaler(t reflect.Type, path string) (encFn, decFn, error) {
	return func(dst []byte, v reflect.Value) []byte {
			if !v.CanInterface() && v.CanAddr() {
				// An unexported field: reach it through its address.
				v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
			}
			var m encoding.BinaryMarshaler
			if v.CanAddr() && v.Addr().Type().Implements(binaryMarshaler) {
				m = v.Addr().Interface().(encoding.BinaryMarshaler)
			} else {
				m = v.Interface().(encoding.BinaryMarshaler)
			}
			b, err := m.MarshalBinary()
			if err != nil {
				panic(fmt.Sprintf("state: encoding %s: %v", path, err))
			}
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			return append(dst, b...)
		}, func(src []byte, v reflect.Value, a *byteArena) (int, error) {
			l, n := binary.Uvarint(src)
			if n <= 0 || l > uint64(len(src)-n) {
				return 0, short(path)
			}
			u := v.Addr().Interface().(encoding.BinaryUnmarshaler)
			if err := u.UnmarshalBinary(src[n : n+int(l)]); err != nil {
				return 0, fmt.Errorf("decoding %s: %w", path, err)
			}
			return n + int(l), nil
		}, nil
}

// float32To64Bits widens f to float64 bits, keeping the payload of a NaN
// as it is (a conversion would set its quiet bit).
func float32To64Bits(f float32) uint64 {
	b := math.Float32bits(f)
	if f != f {
		return uint64(b>>31)<<63 | 0x7ff<<52 | uint64(b&0x7fffff)<<29
	}
	return math.Float64bits(float64(f))
}

// float32From64Bits is the inverse of float32To64Bits.
func float32From64Bits(b uint64) float32 {
	if f := math.Float64frombits(b); f == f {
		return float32(f)
	}
	return math.Float32frombits(uint32(b>>63)<<31 | 0xff<<23 | uint32(b>>29)&0x7fffff)
}
