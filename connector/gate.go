package connector

import "sync"

// DispatchGate serialises a sink's commit dispatch against its teardown. A
// dispatch enters the gate for the duration of one external call; Retire
// begins the teardown: it waits for a call already inside the gate to
// finish, and from then on every Enter is refused. A refused dispatch is
// safe: the handle stays in the checkpoint and the next restore commits it.
type DispatchGate struct {
	mu      sync.Mutex
	idle    sync.Cond
	active  int
	retired bool
}

// NewDispatchGate returns an open gate.
func NewDispatchGate() *DispatchGate {
	g := &DispatchGate{}
	g.idle.L = &g.mu
	return g
}

// Enter admits one dispatch unless the teardown has begun. Every true
// result must be paired with Exit.
func (g *DispatchGate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return false
	}
	g.active++
	return true
}

// Exit ends a dispatch admitted by Enter.
func (g *DispatchGate) Exit() {
	g.mu.Lock()
	g.active--
	if g.active == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// TeardownBegun reports whether Retire has been called.
func (g *DispatchGate) TeardownBegun() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.retired
}

// Retire refuses every later dispatch and waits for those inside the gate
// to finish. It may be called more than once.
func (g *DispatchGate) Retire() {
	g.mu.Lock()
	g.retired = true
	for g.active > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}
