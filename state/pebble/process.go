package pebble

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// What the backends of one process share, when their Options leave the
// sizes unset: one Pebble block cache, and a budget for their entry caches.
const (
	// DefaultProcessBlockCacheBytes is the size of the block cache that the
	// backends of a process share.
	DefaultProcessBlockCacheBytes = 256 << 20
	// DefaultProcessCacheBytes is the entry-cache budget of a process: each
	// backend that does not set CacheBytes gets an equal share of it, at
	// least MinCacheBytes and at most MaxCacheBytes, adjusted as backends
	// open and close.
	DefaultProcessCacheBytes = 1 << 30
	// MinCacheBytes and MaxCacheBytes bound a backend's share of the
	// process's entry-cache budget.
	MinCacheBytes = 16 << 20
	MaxCacheBytes = 256 << 20
)

// process is the state the backends of a process share. Its lock is never
// held with another one.
var process struct {
	sync.Mutex
	// cache is the shared block cache, nil while no backend uses it; it
	// holds one reference of its own, dropped when users reaches zero.
	cache *pebble.Cache
	users int
	// sized are the entry caches that share the budget.
	sized map[*store]bool
}

// acquireBlockCache returns the process's block cache, creating it for the
// first user. Each user calls releaseBlockCache once.
func acquireBlockCache() *pebble.Cache {
	process.Lock()
	defer process.Unlock()
	if process.cache == nil {
		process.cache = pebble.NewCache(DefaultProcessBlockCacheBytes)
	}
	process.users++
	return process.cache
}

// releaseBlockCache drops a user of the process's block cache; the last
// frees it (Pebble frees its memory once the DBs that used it are closed
// too).
func releaseBlockCache() {
	process.Lock()
	defer process.Unlock()
	process.users--
	if process.users == 0 {
		process.cache.Unref()
		process.cache = nil
	}
}

// cacheShare is a backend's share of the entry-cache budget when n
// backends share it.
func cacheShare(n int) int64 {
	return min(MaxCacheBytes, max(MinCacheBytes, DefaultProcessCacheBytes/int64(max(n, 1))))
}

// joinBudget sizes s by the process's entry-cache budget, and resizes the
// others that share it.
func joinBudget(s *store) {
	process.Lock()
	defer process.Unlock()
	if process.sized == nil {
		process.sized = map[*store]bool{}
	}
	process.sized[s] = true
	resizeLocked()
}

// leaveBudget gives s's share back.
func leaveBudget(s *store) {
	process.Lock()
	defer process.Unlock()
	if process.sized[s] {
		delete(process.sized, s)
		resizeLocked()
	}
}

func resizeLocked() {
	share := cacheShare(len(process.sized))
	for s := range process.sized {
		s.limit.Store(share)
	}
}
