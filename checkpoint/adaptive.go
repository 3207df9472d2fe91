package checkpoint

import (
	"fmt"
	"math"
	"slices"
)

// AdaptiveConfig configures an AdaptiveModePolicy. Zero fields take their
// defaults.
type AdaptiveConfig struct {
	// PressureThreshold: a window whose pressure is at or above it is
	// pressured. Default 0.8.
	PressureThreshold float64
	// WindowsToUnaligned is the run of consecutive pressured windows that
	// switches to Unaligned. Default 2.
	WindowsToUnaligned int
	// WindowsToAligned is the run of consecutive calm windows that switches
	// back to Aligned. Default 3.
	WindowsToAligned int
	// History is how many recent observations are kept for diagnostics.
	// Default 16.
	History int
}

// Defaults of AdaptiveConfig.
const (
	// DefaultPressureThreshold is AdaptiveConfig.PressureThreshold's default.
	DefaultPressureThreshold = 0.8
	// DefaultWindowsToUnaligned is AdaptiveConfig.WindowsToUnaligned's
	// default.
	DefaultWindowsToUnaligned = 2
	// DefaultWindowsToAligned is AdaptiveConfig.WindowsToAligned's default.
	DefaultWindowsToAligned = 3
	// DefaultAdaptiveHistory is AdaptiveConfig.History's default.
	DefaultAdaptiveHistory = 16
)

func (c AdaptiveConfig) withDefaults() (AdaptiveConfig, error) {
	if math.IsNaN(c.PressureThreshold) || math.IsInf(c.PressureThreshold, 0) || c.PressureThreshold < 0 {
		return c, fmt.Errorf("configuring adaptive checkpoint mode: pressure threshold %v is not a finite non-negative number", c.PressureThreshold)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"windows to unaligned", c.WindowsToUnaligned},
		{"windows to aligned", c.WindowsToAligned},
		{"history", c.History},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("configuring adaptive checkpoint mode: %s %d is negative", f.name, f.v)
		}
	}
	if c.PressureThreshold == 0 {
		c.PressureThreshold = DefaultPressureThreshold
	}
	if c.WindowsToUnaligned == 0 {
		c.WindowsToUnaligned = DefaultWindowsToUnaligned
	}
	if c.WindowsToAligned == 0 {
		c.WindowsToAligned = DefaultWindowsToAligned
	}
	if c.History == 0 {
		c.History = DefaultAdaptiveHistory
	}
	return c, nil
}

// AdaptiveModePolicy decides, one checkpoint window at a time, whether
// measured pressure calls for unaligned checkpoints. It starts Aligned,
// switches to Unaligned after WindowsToUnaligned consecutive pressured
// windows and back after WindowsToAligned consecutive calm ones, so a
// one-window spike never flips the mode and the mode cannot oscillate faster
// than those runs. It is not safe for concurrent use.
type AdaptiveModePolicy struct {
	cfg      AdaptiveConfig
	mode     Mode
	run      int // consecutive windows arguing against the current mode
	switches int
	history  []float64 // oldest first, at most cfg.History long
}

// NewAdaptiveModePolicy returns a policy in Aligned mode.
func NewAdaptiveModePolicy(cfg AdaptiveConfig) (*AdaptiveModePolicy, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &AdaptiveModePolicy{cfg: cfg, mode: Aligned}, nil
}

// Observe records the pressure of one checkpoint window (sampled once per
// trigger) and returns the mode to stamp on that checkpoint. A NaN pressure
// counts as calm.
func (p *AdaptiveModePolicy) Observe(pressure float64) Mode {
	if len(p.history) == p.cfg.History {
		p.history = slices.Delete(p.history, 0, 1)
	}
	p.history = append(p.history, pressure)

	pressured := pressure >= p.cfg.PressureThreshold
	switch p.mode {
	case Aligned:
		p.step(pressured, p.cfg.WindowsToUnaligned, Unaligned)
	case Unaligned:
		p.step(!pressured, p.cfg.WindowsToAligned, Aligned)
	default:
		panic(fmt.Sprintf("checkpoint: adaptive policy in mode %v", p.mode))
	}
	return p.mode
}

// step extends or breaks the run of windows that argue for switching to
// next, and switches once the run reaches need.
func (p *AdaptiveModePolicy) step(argues bool, need int, next Mode) {
	if !argues {
		p.run = 0
		return
	}
	p.run++
	if p.run >= need {
		p.mode, p.run = next, 0
		p.switches++
	}
}

// Mode returns the mode the last observation decided (Aligned before any).
func (p *AdaptiveModePolicy) Mode() Mode { return p.mode }

// Switches returns how many times the mode flipped; the
// clink_ckpt_adaptive_switch_total metric.
func (p *AdaptiveModePolicy) Switches() int { return p.switches }

// History returns the recent observations, oldest first.
func (p *AdaptiveModePolicy) History() []float64 { return slices.Clone(p.history) }

// Resolver returns a ModeResolver for Config.Resolver that samples pressure
// once per trigger and observes it. pressure is the caller's signal, for
// example the maximum input-channel occupancy; it is called on the
// Coordinator's goroutine.
func (p *AdaptiveModePolicy) Resolver(pressure func() float64) ModeResolver {
	return func(ID) Mode { return p.Observe(pressure()) }
}
