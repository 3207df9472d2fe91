package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// Options configures a Backend. The zero value is ready to use.
type Options struct {
	// Dir is where the backend creates its working directory: a fresh
	// subdirectory, removed at Close. Empty: the system temp directory.
	// Working files are scratch: after a crash the state is restored from
	// a checkpoint, so the runtime may clear Dir when the process starts.
	Dir string
	// CacheBytes bounds the cache of hot entries the backend keeps in front
	// of Pebble. Reads and writes of cached keys do not reach Pebble until
	// the entry is evicted or the backend is captured. Zero: an equal share
	// of the process's budget (DefaultProcessCacheBytes) among the backends
	// open that did not set it, between MinCacheBytes and MaxCacheBytes.
	CacheBytes int64
	// BlockCache is Pebble's block cache, owned by the caller (the backend
	// takes a reference while it is open).
	BlockCache *pebble.Cache
	// BlockCacheBytes, if set, gives the backend a block cache of its own
	// of this size. With neither BlockCache nor BlockCacheBytes, the
	// backends of the process share one block cache
	// (DefaultProcessBlockCacheBytes), freed when the last one closes.
	BlockCacheBytes int64
	// MemTableBytes is the size of Pebble's memtable (default 16 MiB).
	MemTableBytes int64
	// Logger receives Pebble's log lines (default: discarded).
	Logger *slog.Logger
	// Tune, if set, adjusts the options of the working DB (compaction and
	// level settings, say) before it is opened. Settings the backend
	// relies on are set again after it: DisableWAL, ReadOnly, FS.
	Tune func(*pebble.Options)
}

const (
	defaultMemTableBytes = 16 << 20
)

// Validate reports settings that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("CacheBytes is negative (%d)", o.CacheBytes))
	}
	if o.BlockCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("BlockCacheBytes is negative (%d)", o.BlockCacheBytes))
	}
	if o.BlockCache != nil && o.BlockCacheBytes != 0 {
		errs = append(errs, errors.New("BlockCache and BlockCacheBytes are both set"))
	}
	if o.MemTableBytes < 0 {
		errs = append(errs, fmt.Errorf("MemTableBytes is negative (%d)", o.MemTableBytes))
	} else if o.MemTableBytes >= 4<<30 {
		errs = append(errs, fmt.Errorf("MemTableBytes %d is not below 4 GiB", o.MemTableBytes))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.MemTableBytes == 0 {
		o.MemTableBytes = defaultMemTableBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// pebbleLogger writes Pebble's log to a slog.Logger: its info lines at
// debug level (Pebble is chatty), its errors at error level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "channel", "state.pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "channel", "state.pebble")
}

// Fatalf is called by Pebble on a broken invariant, where it cannot go on.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "channel", "state.pebble")
	panic("pebble: " + msg)
}
