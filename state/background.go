package state

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// A large restore does not hold up the job until every key group is
// decoded. Register returns once the restore has started on background
// goroutines (one per core), and the table decodes a key group on first
// use if no goroutine has taken it yet, or waits for the one that has: a
// record reaches its key's state as the checkpoint left it, and the job's
// first output comes after its first key group, not after the last. What
// reads the table as a whole (an iteration, its size, a capture for a
// checkpoint) first waits for every key group, decoding those not taken.
//
// The goroutines write nothing but the shards they decode (as the
// parallel restore does), and the task reaches a shard only through a
// lookup that waited for it, so that the two never share memory a write
// is in. Tables whose slot arrays are carved from shared slabs are not
// restored so: a write to one shard may move another's arrays.

// backgroundMinEntries is the fewest entries a restore decodes in the
// background: smaller restores take milliseconds and are decoded before
// Register returns (tests change it).
var backgroundMinEntries = 1 << 16

// The states of a key group of a background restore.
const (
	groupPending int32 = iota
	groupDecoding
	groupDone
)

// errRestoreClosed is what a lookup panics with when it needs a key group
// of a restore that stopped because the backend closed.
var errRestoreClosed = errors.New("state used after its backend was closed during the restore")

// backgroundRestore is a table's restore running in the background: one
// job per key group restored.
type backgroundRestore struct {
	table string
	// job[g] is the job of the table's shard g, -1 if the restore holds
	// nothing for it.
	job []int32
	// decode decodes job i into its shard; it is called once per job.
	decode func(i int) error
	// fast is the table's fast, which is off while the restore runs so
	// that every lookup goes through findAny, which waits for its key
	// group: find's inline path stays as it was.
	fast  bool
	state []atomic.Int32
	done  []chan struct{}
	errs  []error
	left  atomic.Int64
	// all is closed once every job is done, or once halt stopped the
	// rest (closeAll).
	all      chan struct{}
	closeAll func()
	stop     atomic.Bool
	wg       sync.WaitGroup
}

// newBackgroundRestore returns the restore of a table of shards shards,
// job i decoding into shard shardOf[i].
func newBackgroundRestore(table string, shards int, shardOf []int, decode func(i int) error) *backgroundRestore {
	r := &backgroundRestore{
		table:  table,
		job:    make([]int32, shards),
		decode: decode,
		state:  make([]atomic.Int32, len(shardOf)),
		done:   make([]chan struct{}, len(shardOf)),
		errs:   make([]error, len(shardOf)),
		all:    make(chan struct{}),
	}
	r.closeAll = sync.OnceFunc(func() { close(r.all) })
	for g := range r.job {
		r.job[g] = -1
	}
	for i, g := range shardOf {
		r.job[g] = int32(i)
		r.done[i] = make(chan struct{})
	}
	r.left.Store(int64(len(shardOf)))
	return r
}

// backgroundHold, when not nil, holds the goroutines of the background
// restores started until it is closed (tests set it).
var backgroundHold chan struct{}

// start decodes the jobs on up to workers goroutines, in order.
func (r *backgroundRestore) start(workers int) {
	var next atomic.Int64
	hold := backgroundHold
	for range min(max(workers, 1), len(r.state)) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if hold != nil {
				<-hold
			}
			for !r.stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(r.state) {
					return
				}
				if r.state[i].CompareAndSwap(groupPending, groupDecoding) {
					r.run(i)
				}
			}
		}()
	}
}

// run decodes job i, which the caller took, and marks it done. A panic
// of the decode is job i's error, not the process's end.
func (r *backgroundRestore) run(i int) {
	defer func() {
		if p := recover(); p != nil {
			if se, ok := p.(*StoreError); ok {
				r.errs[i] = se
			} else {
				r.errs[i] = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}
		r.state[i].Store(groupDone)
		close(r.done[i])
		if r.left.Add(-1) == 0 {
			r.closeAll()
		}
	}()
	r.errs[i] = r.decode(i)
}

// await returns once job i is done, decoding it on the calling goroutine
// if no other took it. A job that failed panics with a StoreError (the
// table's lookups have no error result; the runtime fails the task).
func (r *backgroundRestore) await(i int) {
	if r.state[i].Load() != groupDone {
		switch {
		case r.stop.Load():
			panic(&StoreError{State: r.table, Op: "restoring", Err: errRestoreClosed})
		case r.state[i].CompareAndSwap(groupPending, groupDecoding):
			r.run(i)
		default:
			<-r.done[i]
		}
	}
	if err := r.errs[i]; err != nil {
		panic(&StoreError{State: r.table, Op: "restoring", Err: err})
	}
}

// awaitShard is await for the job of shard g, if the restore has one.
func (r *backgroundRestore) awaitShard(g int) {
	if uint(g) < uint(len(r.job)) {
		if i := r.job[g]; i >= 0 {
			r.await(int(i))
		}
	}
}

// finish returns once every job is done (decoding those no goroutine
// took) and the goroutines returned.
func (r *backgroundRestore) finish() {
	for i := range r.state {
		r.await(i)
	}
	r.wg.Wait()
}

// halt stops the goroutines once their current jobs are done and waits
// for them: the restored files they read may be unmapped after it. It
// does not wait for a job the task's goroutine decodes (await): the
// backend closes on that goroutine, never beside it. The restore is over
// then, though key groups are left undone (a lookup of one fails).
func (r *backgroundRestore) halt() {
	r.stop.Store(true)
	r.wg.Wait()
	r.closeAll()
}

// backgroundRestorer is a table whose restore may run in the background.
type backgroundRestorer interface {
	// restoring reports whether key groups are still being restored,
	// finishing the restore when they are all done.
	restoring() bool
	// settle returns once every key group is restored, with the error
	// of the first that failed.
	settle() error
	// haltRestore stops a restore running in the background and waits
	// for its goroutines.
	haltRestore()
	// restoreDone returns a channel closed once the restore is over
	// (every key group restored or failed, or the restore halted), nil
	// when none is running. It may be waited on from any goroutine.
	restoreDone() <-chan struct{}
}

// restoreDone implements backgroundRestorer.
func (t *cowTable[K, V]) restoreDone() <-chan struct{} {
	if t.background == nil {
		return nil
	}
	return t.background.all
}

// Restored returns a channel closed once the key groups that b's tables
// decode in the background are all decoded (or failed to, or b closed),
// nil when no table restores so. Call it on the task's goroutine; the channel may be
// waited on from any other. The runtime waits on it before it lets
// periodic checkpoints start: a capture would wait for the rest of the
// restore.
func (b *MemoryBackend) Restored() <-chan struct{} {
	var chs []<-chan struct{}
	for _, t := range b.tables {
		if br, ok := t.(backgroundRestorer); ok {
			if ch := br.restoreDone(); ch != nil {
				chs = append(chs, ch)
			}
		}
	}
	return AllClosed(chs)
}

// AllClosed returns a channel closed once every channel of chs is: nil
// for none, the one channel for one, or a channel a goroutine closes after
// waiting on each in turn (channels that are never closed keep it
// waiting).
func AllClosed(chs []<-chan struct{}) <-chan struct{} {
	switch len(chs) {
	case 0:
		return nil
	case 1:
		return chs[0]
	}
	all := make(chan struct{})
	go func() {
		for _, ch := range chs {
			<-ch
		}
		close(all)
	}()
	return all
}

// restoring implements backgroundRestorer.
func (t *cowTable[K, V]) restoring() bool {
	r := t.background
	if r == nil {
		return false
	}
	if r.left.Load() > 0 {
		return true
	}
	return t.settle() != nil
}

// settle implements backgroundRestorer.
func (t *cowTable[K, V]) settle() (err error) {
	if t.background == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			se, ok := p.(*StoreError)
			if !ok {
				panic(p)
			}
			err = se
		}
	}()
	t.finishRestore()
	return nil
}

// haltRestore implements backgroundRestorer.
func (t *cowTable[K, V]) haltRestore() {
	if r := t.background; r != nil {
		r.halt()
	}
}

// finishRestore returns once every key group is restored; a key group
// that failed panics with a StoreError.
func (t *cowTable[K, V]) finishRestore() {
	r := t.background
	if r == nil {
		return
	}
	r.finish()
	t.background = nil
	t.fast = r.fast
	t.lastSlot = nil
}

// awaitKey returns once the key group of k is restored; once every key
// group is, the restore is over.
func (t *cowTable[K, V]) awaitKey(k K) {
	r := t.background
	r.awaitShard(t.keyGroup(t.hashKey(k)) - t.rng.Start)
	if r.left.Load() == 0 {
		t.finishRestore()
	}
}
