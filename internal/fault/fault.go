// Package fault provides named fault points: places on a durable or commit
// path where a test can make the process fail.
//
// Two kinds of test use them:
//
//  1. Subprocess crash tests start a clink binary with the environment
//     variable CLINK_FAULT naming one or more points. When the process
//     reaches a named point it kills itself with SIGKILL, so the test sees
//     exactly the on-disk state a crash at that moment would leave.
//     The syntax is a comma-separated list of "name" (the first time the
//     point is reached) or "name@K" (the K-th time, counting from 1).
//  2. In-process tests install a hook with Set; Point then returns the
//     hook's error, which the caller treats like any other I/O failure.
//
// Callers on a durable path do this:
//
//  1. Call Point with a stable, dotted name ("store.write.before-sync") at
//     the moment of interest.
//  2. Return the error Point returns, wrapped, without retrying; it stands
//     for a failure of the step that follows the point.
//
// CLINK_FAULT is read once, when the package is initialised; a malformed
// value ends the process with exit status 2, because a crash test whose fault
// never fires would otherwise pass for the wrong reason. With nothing armed,
// Point costs one atomic load.
package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// EnvVar is the environment variable that arms fault points in a subprocess.
const EnvVar = "CLINK_FAULT"

// target is one armed "name@K" entry of CLINK_FAULT.
type target struct {
	name string
	nth  int64        // kill on the nth time the point is reached, 1-based
	hits atomic.Int64 // times the point has been reached so far
}

// hookEntry is one installed test hook; id tells restores apart.
type hookEntry struct {
	id uint64
	fn func() error
}

var (
	// targets is set once by init and read-only afterwards.
	targets []*target

	// hookCount is the number of installed hooks over all names. Point reads
	// it without the lock to skip the map when no hook is installed.
	hookCount atomic.Int64

	hooks struct {
		sync.Mutex
		next   uint64
		byName map[string][]hookEntry // the last entry is the active one
	}
)

func init() {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		return
	}
	t, err := parseSpec(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clink: %v\n", err)
		os.Exit(2)
	}
	targets = t
}

// parseSpec parses the CLINK_FAULT syntax.
func parseSpec(spec string) ([]*target, error) {
	var out []*target
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("parsing %s=%q: empty fault point name", EnvVar, spec)
		}
		name, count, hasCount := strings.Cut(item, "@")
		t := &target{name: name, nth: 1}
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("parsing %s=%q: bad fault point name %q", EnvVar, spec, name)
		}
		if hasCount {
			n, err := strconv.ParseInt(count, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("parsing %s=%q: bad count %q in %q (want name@K with K >= 1)", EnvVar, spec, count, item)
			}
			t.nth = n
		}
		out = append(out, t)
	}
	return out, nil
}

// Point marks the named place on a durable or commit path. If CLINK_FAULT
// arms this point and this is the armed occurrence, the process kills itself
// with SIGKILL and Point does not return. Otherwise, if a test installed a
// hook for name with Set, Point returns the hook's error; else nil.
func Point(name string) error {
	if targets == nil && hookCount.Load() == 0 {
		return nil
	}
	for _, t := range targets {
		if t.name == name && t.hits.Add(1) == t.nth {
			fmt.Fprintf(os.Stderr, "clink: fault point %s reached (%s=%s): killing the process\n",
				name, EnvVar, os.Getenv(EnvVar))
			killSelf()
		}
	}
	if hookCount.Load() == 0 {
		return nil
	}
	hooks.Lock()
	stack := hooks.byName[name]
	var fn func() error
	if len(stack) > 0 {
		fn = stack[len(stack)-1].fn
	}
	hooks.Unlock()
	if fn == nil {
		return nil
	}
	return fn()
}

// Set installs hook for the named point, for in-process tests: until restore
// is called, Point(name) calls hook and returns its error. Hooks for the same
// name stack; the newest one is active, and restoring it reactivates the one
// below whatever order the restores run in. Set and restore are safe to call
// from any goroutine; hook runs on the goroutine that reached the point.
func Set(name string, hook func() error) (restore func()) {
	if hook == nil {
		panic("fault: Set called with a nil hook for " + name)
	}
	hooks.Lock()
	defer hooks.Unlock()
	if hooks.byName == nil {
		hooks.byName = make(map[string][]hookEntry)
	}
	hooks.next++
	id := hooks.next
	hooks.byName[name] = append(hooks.byName[name], hookEntry{id: id, fn: hook})
	hookCount.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			hooks.Lock()
			defer hooks.Unlock()
			stack := hooks.byName[name]
			for i, h := range stack {
				if h.id == id {
					stack = append(stack[:i:i], stack[i+1:]...)
					break
				}
			}
			if len(stack) == 0 {
				delete(hooks.byName, name)
			} else {
				hooks.byName[name] = stack
			}
			hookCount.Add(-1)
		})
	}
}
