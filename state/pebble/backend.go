package pebble

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/state"
)

// Backend keeps the keyed state of one operator subtask in a Pebble DB in
// a local working directory. See the package documentation for how the
// runtime drives it.
type Backend struct {
	opts           Options
	rng            state.KeyGroupRange
	maxParallelism int
	opened, closed bool
	// token is random per Open: it names the files this run uploads, so
	// that a rerun or a restored copy never reuses a name.
	token string
	work  string // working directory, removed at Close
	dbDir string
	cache *pebble.Cache
	// cacheKind says how cache was obtained, so Close gives it back.
	cacheKind uint8
	db        *pebble.DB
	store     *store
	// tables are the registered tables, byName their names.
	tables []state.BytesTable
	byName map[string]bool
	// unchecked: key-group data given to Restore is in the store, not yet
	// verified by the tables it belongs to.
	unchecked bool
	// restoredFiles maps the local names of the files the DB was restored
	// from to their shared names. Not changed after RestoreFiles, so that
	// captures may read it on the snapshot worker.
	restoredFiles map[string]string
	captures      int
	restores      int
}

var (
	_ state.Backend      = (*Backend)(nil)
	_ state.BytesBackend = (*Backend)(nil)
	_ state.FileRestorer = (*Backend)(nil)
)

// New returns a backend that is not open yet. Options are checked by
// Open (and by Options.Validate).
func New(opts Options) *Backend {
	return &Backend{opts: opts, byName: map[string]bool{}}
}

// Name implements state.Backend.
func (b *Backend) Name() string { return "pebble" }

// Range implements state.BytesBackend.
func (b *Backend) Range() state.KeyGroupRange { return b.rng }

// MaxParallelism implements state.BytesBackend.
func (b *Backend) MaxParallelism() int { return b.maxParallelism }

// Store implements state.BytesBackend.
func (b *Backend) Store() state.BytesStore {
	if b.store == nil {
		return nil
	}
	return b.store
}

// Open implements state.Backend: it creates the working directory and an
// empty DB in it.
func (b *Backend) Open(r state.KeyGroupRange, maxParallelism int) error {
	if b.opened || b.closed {
		return errors.New("opening pebble state backend: it was opened before")
	}
	if maxParallelism < 1 || maxParallelism > state.MaxMaxParallelism || r.Start < 0 || r.End > maxParallelism || r.Start > r.End {
		return fmt.Errorf("opening pebble state backend: key-group range %v of max parallelism %d", r, maxParallelism)
	}
	if err := b.opts.Validate(); err != nil {
		return fmt.Errorf("opening pebble state backend: %w", err)
	}
	b.opts = b.opts.withDefaults()
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return fmt.Errorf("opening pebble state backend: %w", err)
	}
	if b.opts.Dir != "" {
		if err := os.MkdirAll(b.opts.Dir, 0o755); err != nil {
			return fmt.Errorf("opening pebble state backend: %w", err)
		}
	}
	work, err := os.MkdirTemp(b.opts.Dir, "clink-pebble-")
	if err != nil {
		return fmt.Errorf("opening pebble state backend: creating its working directory: %w", err)
	}
	b.token, b.work, b.dbDir = hex.EncodeToString(tok[:]), work, filepath.Join(work, "db")
	b.rng, b.maxParallelism = r, maxParallelism
	switch {
	case b.opts.BlockCache != nil:
		b.cache, b.cacheKind = b.opts.BlockCache, cacheGiven
		b.cache.Ref()
	case b.opts.BlockCacheBytes > 0:
		b.cache, b.cacheKind = pebble.NewCache(b.opts.BlockCacheBytes), cacheOwn
	default:
		b.cache, b.cacheKind = acquireBlockCache(), cacheProcess
	}
	db, err := pebble.Open(b.dbDir, b.pebbleOptions(false))
	if err != nil {
		b.releaseCache()
		os.RemoveAll(work)
		return fmt.Errorf("opening pebble state backend: %w", err)
	}
	b.db = db
	b.store = newStore(b.opts.CacheBytes)
	if b.opts.CacheBytes == 0 {
		joinBudget(b.store)
	}
	b.store.db = db
	b.opened = true
	return nil
}

// How a Backend got its block cache.
const (
	cacheGiven   uint8 = iota // Options.BlockCache: a reference taken
	cacheOwn                  // Options.BlockCacheBytes: its own
	cacheProcess              // the process's shared cache
)

// releaseCache gives the block cache back.
func (b *Backend) releaseCache() {
	if b.cacheKind == cacheProcess {
		releaseBlockCache()
	} else {
		b.cache.Unref()
	}
	b.cache = nil
}

// pebbleOptions returns the options of the working DB, or of a read-only
// DB opened on a checkpoint.
func (b *Backend) pebbleOptions(readOnly bool) *pebble.Options {
	o := &pebble.Options{
		FS:    noSyncFS{vfs.Default},
		Cache: b.cache,
		// The state is made durable by checkpoints, never by a log:
		// Capture flushes the memtable before it takes one.
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       uint64(b.opts.MemTableBytes),
		// A checkpoint carries a copy of the MANIFEST inline: keep it
		// small by rotating it early.
		MaxManifestFileSize: 64 << 10,
		Logger:              pebbleLogger{b.opts.Logger},
		// A corrupt block (a restored file damaged on disk) is logged and
		// the read that found it fails with an error; Pebble's default
		// would end the process.
		EventListener: &pebble.EventListener{
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				b.opts.Logger.Error("pebble found corrupt data", "channel", "state.pebble", "info", info.String())
			},
		},
		ReadOnly: readOnly,
		// A checkpoint uploads the files compactions wrote since the last
		// one: letting more flushes gather in L0 before they are merged
		// into the base level cuts how often the base level is rewritten
		// (at 10M keys changing 1% per checkpoint, 4 (Pebble's default):
		// 25% of the state uploaded per checkpoint on average, 16: 6%), at
		// the cost of more files for a read that misses the entry cache to
		// look into.
		L0CompactionThreshold: 16,
		L0StopWritesThreshold: 64,
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if b.opts.Tune != nil {
		b.opts.Tune(o)
		o.FS, o.DisableWAL, o.ReadOnly = noSyncFS{vfs.Default}, true, readOnly
	}
	if readOnly {
		// Reading a checkpoint once does not need the shared cache.
		o.Cache = nil
		o.CacheSize = 1 << 20
	}
	o.EnsureDefaults()
	return o
}

// Register implements state.Backend. The tables of a Backend are the
// typed states' byte tables; registering one records its name (and, after
// Restore, has it verify its restored entries).
func (b *Backend) Register(t state.Table) error {
	if !b.opened {
		return errors.New("registering a state table before the backend is open")
	}
	if b.closed {
		return errors.New("registering a state table after the backend was closed")
	}
	bt, ok := t.(state.BytesTable)
	if !ok {
		return fmt.Errorf("state %q: the pebble backend holds byte tables only, not %T", t.Name(), t)
	}
	if b.byName[t.Name()] {
		return fmt.Errorf("state %q is registered twice", t.Name())
	}
	if b.unchecked {
		if err := bt.Check(); err != nil {
			return fmt.Errorf("restoring state %q: %w", t.Name(), err)
		}
	}
	b.byName[t.Name()] = true
	b.tables = append(b.tables, bt)
	return nil
}

// Capture implements state.Backend: every table records what it must,
// the cache's writes reach Pebble, the memtable is flushed, and the DB is
// checkpointed (hard links) into a directory of its own. Its cost is that
// of the writes since the last capture, not of the state's size.
func (b *Backend) Capture() (state.Captured, error) {
	if !b.opened || b.closed || b.db == nil {
		return nil, errors.New("capturing pebble state: the backend is not open (or its restore failed)")
	}
	for _, t := range b.tables {
		if err := t.PrepareCapture(); err != nil {
			return nil, fmt.Errorf("capturing pebble state: %w", err)
		}
	}
	if err := b.store.flush(); err != nil {
		return nil, fmt.Errorf("capturing pebble state: %w", err)
	}
	// The lookup iterator would keep the memtable being flushed alive.
	if err := b.store.closeIter(); err != nil {
		return nil, fmt.Errorf("capturing pebble state: %w", err)
	}
	if err := b.db.Flush(); err != nil {
		return nil, fmt.Errorf("capturing pebble state: flushing the memtable: %w", err)
	}
	b.captures++
	dir := filepath.Join(b.work, fmt.Sprintf("capture-%d", b.captures))
	if err := b.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("capturing pebble state: %w", err)
	}
	return &Capture{b: b, dir: dir}, nil
}

// Close implements state.Backend: it closes the DB and removes the
// working directory, with the captures not persisted yet.
func (b *Backend) Close() error {
	if !b.opened || b.closed {
		b.closed = true
		return nil
	}
	b.closed = true
	var errs []error
	if b.db != nil {
		// Unflushed writes are dropped with the directory.
		if err := b.store.closeIter(); err != nil {
			errs = append(errs, err)
		}
		if err := b.db.Close(); err != nil {
			errs = append(errs, err)
		}
		b.db = nil
	}
	b.releaseCache()
	if b.opts.CacheBytes == 0 {
		leaveBudget(b.store)
	}
	if err := os.RemoveAll(b.work); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing pebble state backend: %w", err)
	}
	return nil
}

// Metrics returns the working DB's metrics (levels, compactions, caches),
// nil if the backend is not open.
func (b *Backend) Metrics() *pebble.Metrics {
	if b.db == nil {
		return nil
	}
	return b.db.Metrics()
}
