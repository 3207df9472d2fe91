package checkpoint

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises rapid's default effort for this package's state machines,
// which are cheap to run; -rapid.checks, -rapid.steps, RAPID_CHECKS and
// RAPID_STEPS still win.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	defaults := []struct{ flag, env, value string }{
		{"rapid.checks", "RAPID_CHECKS", "300"},
		{"rapid.steps", "RAPID_STEPS", "100"},
	}
	for _, d := range defaults {
		if _, inEnv := os.LookupEnv(d.env); !set[d.flag] && !inEnv {
			if err := flag.Set(d.flag, d.value); err != nil {
				panic(err)
			}
		}
	}
	os.Exit(m.Run())
}
