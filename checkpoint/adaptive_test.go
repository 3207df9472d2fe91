package checkpoint

import (
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func mustPolicy(t interface {
	Helper()
	Fatal(...any)
}, cfg AdaptiveConfig) *AdaptiveModePolicy {
	t.Helper()
	p, err := NewAdaptiveModePolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// modes renders a run of decisions as a string of a (aligned) and u
// (unaligned), one letter per window.
func modes(p *AdaptiveModePolicy, pressures ...float64) string {
	var b strings.Builder
	for _, x := range pressures {
		if p.Observe(x) == Aligned {
			b.WriteByte('a')
		} else {
			b.WriteByte('u')
		}
	}
	return b.String()
}

func TestAdaptiveModePolicyHysteresis(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       AdaptiveConfig
		pressures []float64
		want      string
		switches  int
	}{
		{"calm stays aligned", AdaptiveConfig{}, []float64{0, 0.5, 0.79, 0.1}, "aaaa", 0},
		{"a one-window spike never flips", AdaptiveConfig{}, []float64{0.9, 0.1, 0.95, 0.2, 1, 0}, "aaaaaa", 0},
		{"two pressured windows switch to unaligned", AdaptiveConfig{}, []float64{0.1, 0.8, 0.9, 0.9}, "aauu", 1},
		{"the threshold itself is pressured", AdaptiveConfig{}, []float64{0.8, 0.8}, "au", 1},
		{
			"three calm windows switch back; a pressured one resets the run", AdaptiveConfig{},
			[]float64{0.9, 0.9, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1},
			"auuuuuuaa", 2,
		},
		{"one calm window in unaligned does not flip", AdaptiveConfig{}, []float64{1, 1, 0, 1, 0, 0, 1}, "auuuuuu", 1},
		{
			"custom thresholds and runs",
			AdaptiveConfig{PressureThreshold: 0.5, WindowsToUnaligned: 3, WindowsToAligned: 1},
			[]float64{0.5, 0.6, 0.4, 0.5, 0.5, 0.5, 0.49, 0.7},
			"aaaaauaa", 2,
		},
		{"NaN counts as calm", AdaptiveConfig{}, []float64{1, math.NaN(), 1, 1, math.NaN(), math.NaN(), math.NaN()}, "aaauuua", 2},
		{"windows of one flip on every change", AdaptiveConfig{WindowsToUnaligned: 1, WindowsToAligned: 1}, []float64{1, 0, 1, 1, 0}, "uauua", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPolicy(t, tc.cfg)
			if p.Mode() != Aligned {
				t.Fatalf("new policy in mode %v, want aligned", p.Mode())
			}
			if got := modes(p, tc.pressures...); got != tc.want {
				t.Fatalf("decisions %s, want %s", got, tc.want)
			}
			if p.Switches() != tc.switches {
				t.Fatalf("Switches() = %d, want %d", p.Switches(), tc.switches)
			}
			if last := tc.want[len(tc.want)-1]; (last == 'u') != (p.Mode() == Unaligned) {
				t.Fatalf("Mode() = %v after deciding %c", p.Mode(), last)
			}
		})
	}
}

func TestAdaptiveModePolicyHistoryIsBounded(t *testing.T) {
	p := mustPolicy(t, AdaptiveConfig{History: 3})
	for _, x := range []float64{0.1, 0.2, 0.3, 0.4, 0.5} {
		p.Observe(x)
	}
	if got, want := p.History(), []float64{0.3, 0.4, 0.5}; !slices.Equal(got, want) {
		t.Fatalf("History() = %v, want %v", got, want)
	}
	p.History()[0] = 9
	if p.History()[0] != 0.3 {
		t.Fatal("History() exposes the policy's own slice")
	}
	if d := mustPolicy(t, AdaptiveConfig{}); len(d.History()) != 0 {
		t.Fatalf("a new policy has history %v", d.History())
	}
	d := mustPolicy(t, AdaptiveConfig{})
	for range 40 {
		d.Observe(0)
	}
	if n := len(d.History()); n != DefaultAdaptiveHistory {
		t.Fatalf("default history holds %d observations, want %d", n, DefaultAdaptiveHistory)
	}
}

func TestAdaptiveConfigRejectsNonsense(t *testing.T) {
	for _, cfg := range []AdaptiveConfig{
		{PressureThreshold: -0.1},
		{PressureThreshold: math.NaN()},
		{PressureThreshold: math.Inf(1)},
		{WindowsToUnaligned: -1},
		{WindowsToAligned: -2},
		{History: -3},
	} {
		if _, err := NewAdaptiveModePolicy(cfg); err == nil || !strings.HasPrefix(err.Error(), "configuring adaptive checkpoint mode") {
			t.Errorf("NewAdaptiveModePolicy(%+v) = %v, want a configuring error", cfg, err)
		}
	}
}

func TestAdaptiveModePolicyAsCoordinatorResolver(t *testing.T) {
	p := mustPolicy(t, AdaptiveConfig{})
	pressure := 0.0
	samples := 0
	c := mustCoordinator(t, Config{MaxConcurrent: 100, Resolver: p.Resolver(func() float64 { samples++; return pressure })}, "a")
	var got strings.Builder
	for _, x := range []float64{0.9, 0.9, 0.9, 0, 0, 0} {
		pressure = x
		b, err := c.Trigger(epoch, TriggerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(b.Mode.String()[:1])
	}
	if _, err := c.Trigger(epoch, TriggerOptions{Terminal: true}); err != nil {
		t.Fatal(err)
	}
	if got.String() != "auuuua" || samples != 6 || p.Switches() != 2 {
		t.Fatalf("stamped %s with %d samples and %d switches, want auuuua, 6 and 2", got.String(), samples, p.Switches())
	}
}

// TestAdaptiveModePolicyProperties checks, for random configurations and
// pressure series, that every switch is earned by a full run of windows on
// the right side of the threshold since the previous switch.
func TestAdaptiveModePolicyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := AdaptiveConfig{
			PressureThreshold:  float64(rapid.IntRange(1, 10).Draw(t, "threshold")) / 10,
			WindowsToUnaligned: rapid.IntRange(1, 4).Draw(t, "toUnaligned"),
			WindowsToAligned:   rapid.IntRange(1, 4).Draw(t, "toAligned"),
			History:            rapid.IntRange(1, 8).Draw(t, "history"),
		}
		p := mustPolicy(t, cfg)
		series := rapid.SliceOf(rapid.IntRange(0, 12)).Draw(t, "pressures")
		mode, run, switches := Aligned, 0, 0
		var seen []float64
		for i, x := range series {
			pressure := float64(x) / 10
			seen = append(seen, pressure)
			got := p.Observe(pressure)
			pressured := pressure >= cfg.PressureThreshold
			if pressured == (mode == Aligned) {
				run++
			} else {
				run = 0
			}
			need := cfg.WindowsToUnaligned
			if mode == Unaligned {
				need = cfg.WindowsToAligned
			}
			want := mode
			if run == need {
				want, run = 1-mode, 0
				switches++
			}
			if got != want {
				t.Fatalf("window %d (pressure %v): decided %v, want %v", i, pressure, got, want)
			}
			mode = got
		}
		if p.Switches() != switches {
			t.Fatalf("Switches() = %d, want %d", p.Switches(), switches)
		}
		if want := seen[max(len(seen)-cfg.History, 0):]; !slices.Equal(p.History(), want) {
			t.Fatalf("History() = %v, want %v", p.History(), want)
		}
	})
}
