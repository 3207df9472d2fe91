package clink_test

import (
	"context"
	"strings"
	"testing"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/state"
)

// TestChainRestorePanicIsAnError: the keyed operators of a chain restore
// their state at once, on goroutines of their own; a panic in one of them
// (here in the function that registers its further state) fails the job
// with an error, as a panic on the task's goroutine does, instead of
// killing the process.
func TestChainRestorePanicIsAnError(t *testing.T) {
	dir := t.TempDir()
	job := func(restore string, panics bool) *clink.Environment {
		env, err := clink.NewEnvironment(clink.Options{CheckpointDir: dir, Restore: restore})
		if err != nil {
			t.Fatal(err)
		}
		src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: 2000}, func(i int64) int64 { return i })
		// Both keyed operators are chained to the generator (parallelism 1).
		a := clink.KeyedProcess(clink.KeyBy(src, func(i int64) int64 { return i % 7 }), "a", clink.KeyedProcessFunction[int64, int64, int64, int64]{
			ProcessElement: func(ctx *clink.KeyedContext[int64, int64], i int64, out *clink.Collector[int64]) error {
				n, _ := ctx.Value()
				ctx.SetValue(n + 1)
				out.Collect(i)
				return nil
			},
			State: func(state.Backend, state.Codec[int64]) (any, error) {
				if panics {
					panic("registering state")
				}
				return nil, nil
			},
		})
		b := clink.Process(clink.KeyBy(a, func(i int64) int64 { return i % 5 }), "b",
			func(ctx *clink.KeyedContext[int64, int64], i int64, out *clink.Collector[int64]) error {
				n, _ := ctx.Value()
				ctx.SetValue(n + 1)
				return nil
			})
		clink.SinkTo(b, "sink", clink.SinkFunc(func(int64) error { return nil }))
		return env
	}
	if err := job("", false).Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := job("latest", true).Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "opening operator a") || !strings.Contains(err.Error(), "panic: registering state") {
		t.Fatalf("Execute = %v, want the panic of operator a's open as the job's error", err)
	}
	// Without the panic the same checkpoint restores.
	if err := job("latest", false).Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}
