package state

import (
	"reflect"
	"unsafe"
)

// A table's values are often byte strings allocated apart from its slot
// arrays (a join's rows), which a checkpoint reads entry by entry, in the
// order of the slots: each read misses the caches and the TLB, one after
// the other. Prefetching the bytes of the entry prefetchAhead slots on
// lets the misses overlap (BenchmarkAppendDelimitedScatteredRows).
const prefetchAhead = 8

// maxRefs bounds the pointers of an entry that are prefetched.
const maxRefs = 4

// refOffsets returns the offsets, in a kv[K, V], of the pointers to the
// bytes that encoding the entry reads: of a key or value that is a
// string, a slice or a pointer, or of such fields of a struct key or
// value (not deeper), at most maxRefs of them.
func refOffsets[K comparable, V any]() []uintptr {
	return fieldRefs(reflect.TypeFor[kv[K, V]]())
}

// valueRefOffsets is refOffsets for a V alone (a change list's values).
func valueRefOffsets[V any]() []uintptr {
	return fieldRefs(reflect.TypeFor[struct{ v V }]())
}

// fieldRefs returns the offsets, in a struct of type t, of its fields'
// pointers as refOffsets says, at most maxRefs of them.
func fieldRefs(t reflect.Type) []uintptr {
	var offs []uintptr
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Struct {
			if isRef(f.Type) {
				offs = append(offs, f.Offset)
			}
			continue
		}
		for j := range f.Type.NumField() {
			if g := f.Type.Field(j); isRef(g.Type) {
				offs = append(offs, f.Offset+g.Offset)
			}
		}
	}
	return offs[:min(len(offs), maxRefs)]
}

// isRef reports whether a value of type t starts with a pointer to bytes
// that its encoding reads.
func isRef(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Pointer:
		return true
	}
	return false
}

// prefetchAheadOf prefetches the bytes that element i+prefetchAhead of s
// points to at offsets offs, if s has one.
func prefetchAheadOf[T any](s []T, i int, offs []uintptr) {
	if j := i + prefetchAhead; j < len(s) {
		prefetchRefs(unsafe.Pointer(&s[j]), offs)
	}
}

// prefetchRefs prefetches the bytes the pointers at offsets offs of the
// entry at e point to.
func prefetchRefs(e unsafe.Pointer, offs []uintptr) {
	for _, o := range offs {
		if p := *(*unsafe.Pointer)(unsafe.Add(e, o)); p != nil {
			prefetch2(p)
		}
	}
}
