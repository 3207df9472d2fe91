package state

import (
	"reflect"
	"runtime"
	"unsafe"
)

// A large table misses the TLB as well as the cache on nearly every
// access: its slots span tens of megabytes in 4 KiB pages. The slot arrays
// of a table whose keys and values hold no pointers are therefore carved
// out of slabs of slabBytes, whose 2 MiB-aligned interior is advised for
// transparent huge pages (hugePages) before it is first touched. A slab is
// an ordinary Go slice: the arrays carved from it keep it alive, and the
// garbage collector frees it when neither the table nor a capture holds
// any of them. Carved space is never reused, so an array carved from a
// slab is zero, as make would return it, and no capture's array is ever
// written again.
//
// A slab whose arrays the table has mostly replaced (grown or copied after
// a capture) would stay alive for the few it still uses: when less than
// half of a full slab is still in use, the table moves those arrays to the
// current slab. So the slabs hold at most about twice the slots the table
// uses, beside what captures in flight hold.

// slabBytes is the size of a slab; arrays of slabMinBytes or more are
// carved from one (smaller ones are too few bytes to matter).
const (
	slabBytes    = 8 << 20
	slabMinBytes = 64 << 10
)

// slotSlab is one slab of slots.
type slotSlab[K comparable, V any] struct {
	mem []kv[K, V]
	// next is the first slot not carved yet.
	next int
	// live counts the slots of arrays the table still uses.
	live int
}

// slabbed reports whether a table of K and V carves its slots from slabs:
// only when neither holds pointers, so that arrays the table has dropped
// but whose slab lives on keep nothing else alive.
func slabbed[K comparable, V any]() bool {
	var x kv[K, V]
	return unsafe.Sizeof(x) > 0 && !hasPointers(reflect.TypeFor[kv[K, V]]())
}

// hasPointers reports whether values of t hold pointers.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

// newSlots returns n zero slots and the slab they were carved from (nil:
// allocated on their own).
func (t *cowTable[K, V]) newSlots(n int) ([]kv[K, V], *slotSlab[K, V]) {
	size := int(unsafe.Sizeof(kv[K, V]{}))
	if !t.slabbed || n*size < slabMinBytes {
		return make([]kv[K, V], n), nil
	}
	if n*size > slabBytes/2 {
		// An array this large is a slab of its own.
		sl := &slotSlab[K, V]{mem: make([]kv[K, V], n), next: n}
		hugePages(unsafe.Pointer(&sl.mem[0]), n*size)
		return sl.mem, sl
	}
	sl := t.slab
	if sl == nil || len(sl.mem)-sl.next < n {
		sl = &slotSlab[K, V]{mem: make([]kv[K, V], slabBytes/size)}
		hugePages(unsafe.Pointer(&sl.mem[0]), len(sl.mem)*size)
		t.slab = sl
	}
	a := sl.mem[sl.next : sl.next+n : sl.next+n]
	sl.next += n
	return a, sl
}

// setSlots makes slots (carved from slab, or nil) the slot array of s in
// place of its current one, and moves the arrays still used in the slab
// it leaves if that slab is now mostly unused. The caller clears
// lastSlot. In a table that is not slabbed it changes nothing but s.
func (t *cowTable[K, V]) setSlots(s *kgTable[K, V], slots []kv[K, V], slab *slotSlab[K, V]) {
	old := s.slab
	if old != nil {
		old.live -= len(s.slots)
	}
	s.slots, s.slab = slots, slab
	if slab != nil {
		slab.live += len(slots)
	}
	if old == nil || old == t.slab || old == slab || old.live*2 >= len(old.mem) {
		return
	}
	// Move the arrays left in old to the current slab (as a write after a
	// capture copies them): captures keep the old arrays, unchanged.
	for g := range t.shards {
		o := &t.shards[g]
		if o.slab != old {
			continue
		}
		a, sl := t.newSlots(len(o.slots))
		copySlots(a, o.slots)
		old.live -= len(o.slots)
		o.slots, o.slab = a, sl
		if sl != nil {
			sl.live += len(a)
		}
	}
}

// copySlotsChunk is how many slots copySlots copies in one call of copy.
const copySlotsChunk = 4096

// copySlots copies src into dst as copy does, a chunk at a time. One copy
// of a large array of slots that hold pointers runs in the runtime, where
// the goroutine cannot be preempted, with a write barrier per pointer while
// the collector marks: a key group of millions of slots then held its
// processor for hundreds of milliseconds, and a snapshot worker readied
// behind the task waited for all of it. A preemption request rarely finds
// the loop between two chunks, so it yields after each.
func copySlots[K comparable, V any](dst, src []kv[K, V]) {
	for len(src) > copySlotsChunk {
		copy(dst[:copySlotsChunk], src[:copySlotsChunk])
		dst, src = dst[copySlotsChunk:], src[copySlotsChunk:]
		runtime.Gosched()
	}
	copy(dst, src)
}
