package fault

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    string // name@nth, space separated
		wantErr bool
	}{
		{spec: "store.write.before-sync", want: "store.write.before-sync@1"},
		{spec: "a@3", want: "a@3"},
		{spec: "a@2, b", want: "a@2 b@1"},
		{spec: "a@0", wantErr: true},
		{spec: "a@-1", wantErr: true},
		{spec: "a@x", wantErr: true},
		{spec: "a@", wantErr: true},
		{spec: "@2", wantErr: true},
		{spec: "a,,b", wantErr: true},
		{spec: "a b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseSpec(tt.spec)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseSpec(%q) = %v, want an error", tt.spec, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSpec(%q): %v", tt.spec, err)
			}
			var s string
			for i, tg := range got {
				if i > 0 {
					s += " "
				}
				s += fmt.Sprintf("%s@%d", tg.name, tg.nth)
			}
			if s != tt.want {
				t.Fatalf("parseSpec(%q) = %s, want %s", tt.spec, s, tt.want)
			}
		})
	}
}

func TestPointWithoutHookIsNil(t *testing.T) {
	if err := Point("fault.test.nothing"); err != nil {
		t.Fatalf("Point with nothing installed = %v, want nil", err)
	}
}

func TestSetAndRestore(t *testing.T) {
	errA := errors.New("a")
	errB := errors.New("b")
	const name = "fault.test.stack"

	restoreA := Set(name, func() error { return errA })
	if err := Point(name); !errors.Is(err, errA) {
		t.Fatalf("Point after Set(a) = %v, want %v", err, errA)
	}
	if err := Point("fault.test.other"); err != nil {
		t.Fatalf("Point on another name = %v, want nil", err)
	}
	restoreB := Set(name, func() error { return errB })
	if err := Point(name); !errors.Is(err, errB) {
		t.Fatalf("Point after Set(b) = %v, want %v", err, errB)
	}
	// Restoring the older hook first leaves the newer one active.
	restoreA()
	if err := Point(name); !errors.Is(err, errB) {
		t.Fatalf("Point after restoring a = %v, want %v", err, errB)
	}
	restoreA() // idempotent: must not drop b or miscount
	restoreB()
	if err := Point(name); err != nil {
		t.Fatalf("Point after restoring both = %v, want nil", err)
	}
	if n := hookCount.Load(); n != 0 {
		t.Fatalf("hookCount = %d after every restore, want 0", n)
	}
}

func TestHookCountsCalls(t *testing.T) {
	const name = "fault.test.count"
	var mu sync.Mutex
	calls := 0
	restore := Set(name, func() error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 3 {
			return errors.New("third")
		}
		return nil
	})
	defer restore()
	var errs []error
	for range 4 {
		errs = append(errs, Point(name))
	}
	if errs[0] != nil || errs[1] != nil || errs[2] == nil || errs[3] != nil {
		t.Fatalf("errors = %v, want only the third non-nil", errs)
	}
}

func TestConcurrentSetAndPoint(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("fault.test.concurrent.%d", g%2)
			for range 200 {
				want := errors.New("x")
				restore := Set(name, func() error { return want })
				if err := Point(name); err == nil {
					t.Errorf("Point(%s) = nil while a hook is installed", name)
				}
				restore()
				_ = Point("fault.test.concurrent.none")
			}
		}()
	}
	wg.Wait()
	if n := hookCount.Load(); n != 0 {
		t.Fatalf("hookCount = %d after every restore, want 0", n)
	}
}

func TestSetNilHookPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Set with a nil hook did not panic")
		}
	}()
	Set("fault.test.nil", nil)
}

func BenchmarkPointDisarmed(b *testing.B) {
	for b.Loop() {
		_ = Point("store.write.before-sync")
	}
}
