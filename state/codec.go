package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// Codec turns values of one type into bytes and back. Append must be
// deterministic: equal values give equal bytes (keys are hashed from them).
// Its methods are called from several goroutines at once (a snapshot is
// encoded beside the task's writes, key groups are restored in parallel),
// so a codec must not keep state between calls. Decode must copy what the
// value keeps of src: src is a buffer of the state backend's (in a
// restore, a checkpoint file mapped read-only and unmapped after).
type Codec[T any] interface {
	// Append appends the encoding of v to dst.
	Append(dst []byte, v T) []byte
	// Decode decodes one value from the front of src and returns it with the
	// number of bytes consumed.
	Decode(src []byte) (T, int, error)
}

// ErrShortBuffer is wrapped by decoders when the input ends mid-value.
var ErrShortBuffer = errors.New("input ends in the middle of a value")

// CodecFor returns the built-in codec for T: fixed-width little-endian for
// integers, floats and bool, length-prefixed bytes for string and []byte,
// and a compiled reflection codec for everything else (structs with
// exported or unexported fields, slices, maps, pointers, and types that
// implement encoding.BinaryMarshaler). Types holding funcs, channels or
// interfaces cannot be encoded: CheckCodec reports them.
func CodecFor[T any]() Codec[T] {
	var zero T
	var c any
	switch any(zero).(type) {
	case string:
		c = stringCodec{}
	case []byte:
		c = bytesCodec{}
	case int:
		c = fixedCodec[int]{}
	case int64:
		c = fixedCodec[int64]{}
	case int32:
		c = fixedCodec[int32]{}
	case int16:
		c = fixedCodec[int16]{}
	case int8:
		c = fixedCodec[int8]{}
	case uint:
		c = fixedCodec[uint]{}
	case uint64:
		c = fixedCodec[uint64]{}
	case uint32:
		c = fixedCodec[uint32]{}
	case uint16:
		c = fixedCodec[uint16]{}
	case uint8:
		c = fixedCodec[uint8]{}
	case float64:
		c = floatCodec{}
	case float32:
		c = float32Codec{}
	case bool:
		c = boolCodec{}
	default:
		return newReflectCodec[T]()
	}
	return c.(Codec[T])
}

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (stringCodec) Decode(src []byte) (string, int, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return "", 0, fmt.Errorf("decoding string: %w", ErrShortBuffer)
	}
	return string(src[k : k+int(n)]), k + int(n), nil
}

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (bytesCodec) Decode(src []byte) ([]byte, int, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return nil, 0, fmt.Errorf("decoding bytes: %w", ErrShortBuffer)
	}
	return append([]byte(nil), src[k:k+int(n)]...), k + int(n), nil
}

type integer interface {
	~int | ~int64 | ~int32 | ~int16 | ~int8 | ~uint | ~uint64 | ~uint32 | ~uint16 | ~uint8
}

// fixedCodec encodes integers as 8 little-endian bytes, so that an integer
// key hashes to the same value whatever its width.
type fixedCodec[T integer] struct{}

func (fixedCodec[T]) Append(dst []byte, v T) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(v))
}

func (fixedCodec[T]) Decode(src []byte) (T, int, error) {
	if len(src) < 8 {
		return 0, 0, fmt.Errorf("decoding integer: %w", ErrShortBuffer)
	}
	return T(binary.LittleEndian.Uint64(src)), 8, nil
}

type floatCodec struct{}

func (floatCodec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func (floatCodec) Decode(src []byte) (float64, int, error) {
	if len(src) < 8 {
		return 0, 0, fmt.Errorf("decoding float64: %w", ErrShortBuffer)
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), 8, nil
}

type float32Codec struct{}

func (float32Codec) Append(dst []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
}

func (float32Codec) Decode(src []byte) (float32, int, error) {
	if len(src) < 4 {
		return 0, 0, fmt.Errorf("decoding float32: %w", ErrShortBuffer)
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(src)), 4, nil
}

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (boolCodec) Decode(src []byte) (bool, int, error) {
	if len(src) < 1 {
		return false, 0, fmt.Errorf("decoding bool: %w", ErrShortBuffer)
	}
	switch src[0] {
	case 0:
		return false, 1, nil
	case 1:
		return true, 1, nil
	}
	return false, 0, fmt.Errorf("decoding bool: invalid byte %#x", src[0])
}

// RunDecoder is implemented by a codec that decodes a run of values better
// with state kept from one value to the next, which Decode may not keep.
// A restore decodes the keys and values of each key group it restores
// with functions NewDecoder returned for that key group alone: for
// instance, keys that repeat a string of the key before them can share its
// bytes instead of copying them once each.
type RunDecoder[T any] interface {
	// NewDecoder returns a function that decodes as Decode does, for one
	// goroutine and one run of values; the values it returns may share
	// memory with each other (never with src).
	NewDecoder() func(src []byte) (T, int, error)
}

// decoderOf returns the decode function for one run of values of c: its
// NewDecoder's if it is a RunDecoder, else its Decode.
func decoderOf[T any](c Codec[T]) func(src []byte) (T, int, error) {
	if r, ok := c.(RunDecoder[T]); ok {
		return r.NewDecoder()
	}
	return c.Decode
}

// KeyHasher is implemented by a key codec that hashes its keys itself
// instead of from their encoding (see HashInKeyGroup). The hash decides
// the key's key group, so it must be as stable as the encoding. HashKey is
// called from several goroutines at once, as the codec's methods are.
type KeyHasher[K any] interface {
	HashKey(k K) uint64
}

// HasherFor returns a stable hash function for keys of type K. Strings and
// integers are hashed without allocation; other types are hashed from their
// codec encoding, unless the codec is a KeyHasher. The function hashing
// encodings reuses one buffer: it is for one goroutine at a time.
func HasherFor[K any](codec Codec[K]) func(K) uint64 {
	if h, ok := codec.(KeyHasher[K]); ok && keyHashOf[K]() == keyHashCodec {
		return h.HashKey
	}
	switch keyHashOf[K]() {
	case keyHashString:
		return func(k K) uint64 { return HashString(*(*string)(unsafe.Pointer(&k))) }
	case keyHash64:
		return func(k K) uint64 { return HashUint64(*(*uint64)(unsafe.Pointer(&k))) }
	case keyHashInt32:
		return func(k K) uint64 { return HashUint64(uint64(*(*int32)(unsafe.Pointer(&k)))) }
	case keyHashUint32:
		return func(k K) uint64 { return HashUint64(uint64(*(*uint32)(unsafe.Pointer(&k)))) }
	}
	buf := make([]byte, 0, 64)
	return func(k K) uint64 {
		buf = codec.Append(buf[:0], k)
		return HashBytes(buf)
	}
}

// keyHash says how HasherFor hashes keys of a type, so that the memory
// backend can hash the common key types inline, exactly as HasherFor does.
type keyHash uint8

const (
	keyHashCodec  keyHash = iota // HashBytes of the codec's encoding
	keyHashString                // HashString
	keyHash64                    // HashUint64 of the 8 bytes
	keyHashInt32                 // HashUint64 of the sign-extended value
	keyHashUint32                // HashUint64 of the zero-extended value
)

func keyHashOf[K any]() keyHash {
	var zero K
	if _, ok := any(zero).(string); ok {
		return keyHashString
	}
	switch reflect.TypeFor[K]().Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return keyHash64
	case reflect.Int32:
		return keyHashInt32
	case reflect.Uint32:
		return keyHashUint32
	}
	return keyHashCodec
}
