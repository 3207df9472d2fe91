package pebble

import (
	"testing"

	"github.com/clinkstream/clink/state"
)

// TestProcessBlockCache: backends that do not size their block cache share
// the process's one, which is freed when the last of them closes; their
// entry caches share the process's budget.
func TestProcessBlockCache(t *testing.T) {
	open := func(opts Options) *Backend {
		t.Helper()
		opts.Dir = t.TempDir()
		b := New(opts)
		if err := b.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
			t.Fatal(err)
		}
		return b
	}
	users := func() (int, bool) {
		process.Lock()
		defer process.Unlock()
		return process.users, process.cache != nil
	}
	if n, _ := users(); n != 0 {
		// Backends of other tests are open: the release cannot be seen.
		t.Skipf("%d backends of other tests share the process's cache", n)
	}
	a, b := open(Options{}), open(Options{})
	own := open(Options{BlockCacheBytes: 1 << 20, CacheBytes: 1 << 20})
	if a.cache != b.cache {
		t.Error("two subtasks have block caches of their own")
	}
	if own.cache == a.cache {
		t.Error("a backend with BlockCacheBytes uses the process's cache")
	}
	if n, live := users(); n != 2 || !live {
		t.Fatalf("two open: %d users, cache live %v", n, live)
	}
	if got := a.cache.MaxSize(); got != DefaultProcessBlockCacheBytes {
		t.Errorf("shared cache of %d bytes, want %d", got, DefaultProcessBlockCacheBytes)
	}
	// Both read through the one cache.
	for _, be := range []*Backend{a, b} {
		v, err := state.NewValue(be, "v", state.CodecFor[int64](), state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		v.Put(1, 1)
		if _, err := be.Capture(); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Metrics().BlockCache; got != b.Metrics().BlockCache {
		t.Errorf("block cache metrics differ: %+v and %+v", got, b.Metrics().BlockCache)
	}
	if got, want := a.store.limit.Load(), cacheShare(2); got != want || got != b.store.limit.Load() {
		t.Errorf("entry caches %d and %d bytes, want %d each", got, b.store.limit.Load(), want)
	}
	if got := own.store.limit.Load(); got != 1<<20 {
		t.Errorf("a backend with CacheBytes has an entry cache of %d bytes", got)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, live := users(); n != 1 || !live {
		t.Fatalf("one closed: %d users, cache live %v", n, live)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, live := users(); n != 0 || live {
		t.Fatalf("both closed: %d users, cache live %v; want it released", n, live)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	process.Lock()
	sized := len(process.sized)
	process.Unlock()
	if sized != 0 {
		t.Errorf("%d entry caches still share the budget", sized)
	}
	// The next backend gets a fresh cache.
	c := open(Options{})
	defer c.Close()
	if n, live := users(); n != 1 || !live {
		t.Fatalf("reopened: %d users, cache live %v", n, live)
	}
}

func TestCacheShare(t *testing.T) {
	for n, want := range map[int]int64{0: MaxCacheBytes, 1: MaxCacheBytes, 4: MaxCacheBytes, 16: 64 << 20, 32: 32 << 20, 64: MinCacheBytes, 1000: MinCacheBytes} {
		if got := cacheShare(n); got != want {
			t.Errorf("cacheShare(%d) = %d, want %d", n, got, want)
		}
	}
}
