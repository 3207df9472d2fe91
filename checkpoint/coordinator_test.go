package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// epoch is the zero of the scripted tests' clock: now=5s means epoch+5s.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// formatEffect renders an effect with its trigger time relative to epoch.
func formatEffect(e Effect) string {
	switch e := e.(type) {
	case WriteMarker:
		return fmt.Sprintf("%v triggered=+%v", e, e.TriggeredAt.Sub(epoch))
	case NotifyComplete:
		return fmt.Sprintf("%v triggered=+%v", e, e.TriggeredAt.Sub(epoch))
	default:
		return e.String()
	}
}

// drain renders Ready's effects, one per line, and advances.
func drain(c *Coordinator) string {
	effects := c.Ready()
	c.Advance()
	if len(effects) == 0 {
		return "no effects\n"
	}
	var b strings.Builder
	for _, e := range effects {
		b.WriteString(formatEffect(e))
		b.WriteByte('\n')
	}
	return b.String()
}

func describeCoordinator(c *Coordinator) string {
	var b strings.Builder
	for _, id := range c.InFlight() {
		f := c.inFlight[id]
		fmt.Fprintf(&b, "in-flight %d %v %v pending=%v\n", id, f.mode, f.phase, c.Pending(id))
	}
	fmt.Fprintf(&b, "last-completed=%d next=%d floor=%d\n", c.LastCompleted(), c.NextID(), c.RewindFloor())
	return b.String()
}

func scanDuration(t testing.TB, td *datadriven.TestData, key string) time.Duration {
	var s string
	td.ScanArgs(t, key, &s)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: parsing %s=%q: %v", td.Pos, key, s, err)
	}
	return d
}

func maybeDuration(t testing.TB, td *datadriven.TestData, key string) time.Duration {
	if !td.HasArg(key) {
		return 0
	}
	return scanDuration(t, td, key)
}

func scanMode(t testing.TB, td *datadriven.TestData, key string) Mode {
	var s string
	td.ScanArgs(t, key, &s)
	m, err := ParseMode(s)
	if err != nil {
		t.Fatalf("%s: %v", td.Pos, err)
	}
	return m
}

func scanReason(td *datadriven.TestData) error {
	if arg, ok := td.Arg("reason"); ok {
		return errors.New(strings.Join(arg.Vals, ", "))
	}
	return nil
}

// catchPanic runs f and renders a panic as output instead of failing.
func catchPanic(f func() string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v\n", r)
		}
	}()
	return f()
}

func TestCoordinatorScripts(t *testing.T) {
	var c *Coordinator // replaced by each "new"
	datadriven.RunTest(t, "testdata/coordinator.txt", func(t *testing.T, td *datadriven.TestData) string {
		return catchPanic(func() string { return runCoordinatorCommand(t, td, &c) })
	})
}

func runCoordinatorCommand(t *testing.T, td *datadriven.TestData, cp **Coordinator) string {
	if td.Cmd == "new" {
		cfg := Config{Timeout: maybeDuration(t, td, "timeout")}
		if td.HasArg("mode") {
			cfg.DefaultMode = scanMode(t, td, "mode")
		}
		if td.HasArg("first") {
			var first uint64
			td.ScanArgs(t, "first", &first)
			cfg.FirstID = ID(first)
		}
		td.MaybeScanArgs(t, "max", &cfg.MaxConcurrent)
		if arg, ok := td.Arg("resolver"); ok {
			// The resolver cycles through the listed modes.
			var modes []Mode
			for _, v := range arg.Vals {
				m, err := ParseMode(v)
				if err != nil {
					t.Fatal(err)
				}
				modes = append(modes, m)
			}
			calls := 0
			cfg.Resolver = func(ID) Mode {
				m := modes[calls%len(modes)]
				calls++
				return m
			}
		}
		c, err := NewCoordinator(cfg)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		*cp = c
		return "ok\n"
	}

	c := *cp
	if c == nil {
		t.Fatalf("%s: %s before new", td.Pos, td.Cmd)
	}
	id := func() ID {
		var v uint64
		td.ScanArgs(t, "id", &v)
		return ID(v)
	}
	participants := func() []ParticipantID {
		arg, ok := td.Arg("p")
		if !ok {
			t.Fatalf("%s: missing p=", td.Pos)
		}
		ps := make([]ParticipantID, len(arg.Vals))
		for i, v := range arg.Vals {
			ps[i] = ParticipantID(v)
		}
		return ps
	}

	switch td.Cmd {
	case "register":
		for _, p := range participants() {
			c.Register(p)
		}
		return drain(c)

	case "trigger":
		var opts TriggerOptions
		if td.HasArg("mode") {
			m := scanMode(t, td, "mode")
			opts.Mode = &m
		}
		opts.Terminal = td.HasArg("terminal")
		b, err := c.Trigger(epoch.Add(maybeDuration(t, td, "now")), opts)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err) + drain(c)
		}
		return b.String() + "\n" + drain(c)

	case "ack":
		info := AckInfo{Alignment: maybeDuration(t, td, "align")}
		td.MaybeScanArgs(t, "bytes", &info.Bytes)
		td.MaybeScanArgs(t, "full", &info.FullBytes)
		for _, p := range participants() {
			c.Ack(id(), p, info)
		}
		return drain(c)

	case "decline":
		for _, p := range participants() {
			c.Decline(id(), p, scanReason(td))
		}
		return drain(c)

	case "abort":
		c.Abort(id(), scanReason(td))
		return drain(c)

	case "tick":
		c.Tick(epoch.Add(scanDuration(t, td, "now")))
		return drain(c)

	case "marker-written":
		c.MarkerWritten(id())
		return drain(c)

	case "marker-failed":
		c.MarkerFailed(id(), scanReason(td))
		return drain(c)

	case "reset":
		var from uint64
		td.ScanArgs(t, "from", &from)
		c.Reset(ID(from))
		return drain(c)

	case "state":
		return describeCoordinator(c)
	}
	t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	return ""
}

func TestCoordinatorConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"zero is valid", Config{}, ""},
		{"unaligned default", Config{DefaultMode: Unaligned, Timeout: time.Second, MaxConcurrent: 3, FirstID: 9}, ""},
		{"bad mode", Config{DefaultMode: Mode(7)}, "default mode mode(7)"},
		{"negative timeout", Config{Timeout: -time.Second}, "timeout -1s is negative"},
		{"negative concurrency", Config{MaxConcurrent: -1}, "max concurrent checkpoints -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := NewCoordinator(tc.cfg); err != nil {
					t.Fatalf("NewCoordinator() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := NewCoordinator(tc.cfg); err == nil {
				t.Fatal("NewCoordinator accepted an invalid config")
			}
		})
	}
}

func mustCoordinator(t *testing.T, cfg Config, ps ...ParticipantID) *Coordinator {
	t.Helper()
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		c.Register(p)
	}
	return c
}

func TestCoordinatorTriggerErrorsAreSentinels(t *testing.T) {
	c := mustCoordinator(t, Config{})
	if _, err := c.Trigger(epoch, TriggerOptions{}); !errors.Is(err, ErrNoParticipants) {
		t.Fatalf("Trigger with nobody registered = %v, want ErrNoParticipants", err)
	}
	c.Register("a")
	if _, err := c.Trigger(epoch, TriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Trigger(epoch, TriggerOptions{}); !errors.Is(err, ErrTooManyInFlight) {
		t.Fatalf("second Trigger = %v, want ErrTooManyInFlight", err)
	}
	bad := Mode(9)
	c.Abort(1, nil)
	if _, err := c.Trigger(epoch, TriggerOptions{Mode: &bad}); err == nil {
		t.Fatal("Trigger accepted mode(9)")
	}
	if got := c.NextID(); got != 2 {
		t.Fatalf("a refused trigger consumed an id: NextID() = %d, want 2", got)
	}
	if _, err := c.Trigger(epoch, TriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("disk full")
	c.Decline(2, "a", cause)
	if _, err := c.Trigger(epoch, TriggerOptions{}); !errors.Is(err, ErrRewinding) {
		t.Fatalf("Trigger after a decline = %v, want ErrRewinding", err)
	}
	effects := c.Ready()
	if len(effects) != 3 {
		t.Fatalf("Ready() = %v, want abort of 1, abort of 2, fail of 2", effects)
	}
	fail, ok := effects[2].(FailJob)
	if !ok || !errors.Is(fail.Reason, ErrDeclined) || !errors.Is(fail.Reason, cause) {
		t.Fatalf("last effect = %v, want FailJob wrapping ErrDeclined and the cause", effects[2])
	}
	if aborted := effects[0].(NotifyAborted); !errors.Is(aborted.Reason, ErrAborted) {
		t.Fatalf("abort with a nil reason = %v, want it to wrap ErrAborted", aborted.Reason)
	}
}

func TestCoordinatorEffectReasonsWrap(t *testing.T) {
	c := mustCoordinator(t, Config{Timeout: time.Second, MaxConcurrent: 3}, "a", "b")
	for range 3 {
		if _, err := c.Trigger(epoch, TriggerOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Ack(1, "a", AckInfo{})
	c.Ack(1, "b", AckInfo{})
	ioErr := errors.New("no space left on device")
	c.MarkerFailed(1, ioErr)
	c.Tick(epoch.Add(time.Second))
	var reasons []error
	for _, e := range c.Ready() {
		if f, ok := e.(FailJob); ok {
			reasons = append(reasons, f.Reason)
		}
	}
	if len(reasons) != 3 {
		t.Fatalf("got %d FailJob effects, want 3: %v", len(reasons), c.Ready())
	}
	if !errors.Is(reasons[0], ErrMarkerWrite) || !errors.Is(reasons[0], ioErr) {
		t.Errorf("marker failure reason %v does not wrap ErrMarkerWrite and the cause", reasons[0])
	}
	for _, r := range reasons[1:] {
		if !errors.Is(r, ErrTimeout) || !strings.Contains(r.Error(), "[a b]") {
			t.Errorf("timeout reason %q does not wrap ErrTimeout or name the pending participants", r)
		}
	}
	if got := c.RewindFloor(); got != 1 {
		t.Errorf("RewindFloor() = %d, want the lowest failed id 1", got)
	}
}

func TestCoordinatorReadyIsStableUntilAdvance(t *testing.T) {
	c := mustCoordinator(t, Config{}, "a")
	if _, err := c.Trigger(epoch, TriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Ack(1, "a", AckInfo{Bytes: 5})
	first := c.Ready()
	first[0] = nil // the caller owns the returned slice
	if second := c.Ready(); len(second) != 1 || second[0] == nil {
		t.Fatalf("Ready() changed without Advance: %v", second)
	}
	c.Advance()
	if got := c.Ready(); len(got) != 0 {
		t.Fatalf("Ready() after Advance = %v, want none", got)
	}
}

func TestCoordinatorResolverNotCalledForOverridesOrTerminals(t *testing.T) {
	calls := 0
	c := mustCoordinator(t, Config{MaxConcurrent: 5, Resolver: func(ID) Mode { calls++; return Unaligned }}, "a")
	aligned := Aligned
	for _, opts := range []TriggerOptions{{Mode: &aligned}, {Terminal: true}} {
		b, err := c.Trigger(epoch, opts)
		if err != nil {
			t.Fatal(err)
		}
		if b.Mode != Aligned {
			t.Fatalf("Trigger(%+v) = %v, want aligned", opts, b)
		}
	}
	if calls != 0 {
		t.Fatalf("resolver called %d times, want 0", calls)
	}
	b, err := c.Trigger(epoch, TriggerOptions{})
	if err != nil || b.Mode != Unaligned || calls != 1 {
		t.Fatalf("Trigger() = %v, %v after %d resolver calls, want unaligned after 1", b, err, calls)
	}
}

func TestCoordinatorResetRejectsUnallocatedRestorePoint(t *testing.T) {
	c := mustCoordinator(t, Config{FirstID: 10}, "a")
	c.Reset(9) // a checkpoint of an earlier incarnation
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "next id 10") {
			t.Fatalf("Reset(10) recovered %v, want a panic naming the next id", r)
		}
	}()
	c.Reset(10)
}
