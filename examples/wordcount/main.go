// Command wordcount is a small clink job: it generates sentences, splits
// them into words, counts each word with keyed state, and prints the
// running counts, checkpointing every second into a directory under the
// system temp directory (or -checkpoint-dir). Run it twice with
// -restore latest and the same directory to see it resume.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clinkstream/clink"
)

var sentences = []string{
	"the quick brown fox jumps over the lazy dog",
	"a stream is a table in motion",
	"every record reaches the output exactly once",
	"barriers flow with the records",
}

func main() {
	var (
		dir         = flag.String("checkpoint-dir", "", "checkpoint directory (default: a new directory under the system temp directory)")
		restore     = flag.String("restore", "", "restore from 'latest' or a checkpoint id")
		count       = flag.Int64("sentences", 20000, "number of sentences to generate (negative: unbounded)")
		parallelism = flag.Int("parallelism", 2, "parallelism")
		mode        = flag.String("checkpoint-mode", "aligned", "aligned, unaligned or adaptive")
		quiet       = flag.Bool("quiet", false, "print only the final counts")
	)
	flag.Parse()
	if err := run(*dir, *restore, *count, *parallelism, *mode, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

type wordCount struct {
	Word  string
	Count int64
}

func run(dir, restore string, count int64, parallelism int, modeName string, quiet bool) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "clink-wordcount-"); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, "checkpoints:", dir)
	mode, err := clink.ParseCheckpointMode(modeName)
	if err != nil {
		return err
	}
	env, err := clink.NewEnvironment(clink.Options{
		Parallelism:        parallelism,
		CheckpointDir:      dir,
		CheckpointInterval: time.Second,
		CheckpointMode:     mode,
		Restore:            restore,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	lines := clink.FromGenerator(env, "sentences", clink.GeneratorOptions{Count: count, RatePerSecond: 20000},
		func(i int64) string { return sentences[i%int64(len(sentences))] })
	words := clink.FlatMap(lines, "split", func(s string, out *clink.Collector[string]) error {
		for _, w := range strings.Fields(s) {
			out.Collect(w)
		}
		return nil
	})
	counts := clink.Process(clink.KeyBy(words, func(w string) string { return w }), "count",
		func(ctx *clink.KeyedContext[string, int64], w string, out *clink.Collector[wordCount]) error {
			n, _ := ctx.Value()
			n++
			ctx.SetValue(n)
			out.Collect(wordCount{Word: w, Count: n})
			return nil
		})
	final := &finalCounts{m: map[string]int64{}}
	if quiet {
		clink.SinkTo(counts, "final", clink.Sink[wordCount](final))
	} else {
		clink.SinkTo(counts, "print", clink.PrintSink[wordCount](os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := env.Execute(ctx); err != nil {
		return err
	}
	if quiet {
		final.print()
	}
	return nil
}

var mu sync.Mutex

// finalCounts keeps the highest count seen per word.
type finalCounts struct {
	m map[string]int64
}

func (f *finalCounts) Open(clink.SinkContext) (clink.SinkWriter[wordCount], error) { return f, nil }
func (f *finalCounts) Close() error                                                { return nil }

func (f *finalCounts) Write(c wordCount) error {
	// Each word is counted by one subtask only, so updates of one key never
	// race; the map itself is shared, so guard it.
	mu.Lock()
	f.m[c.Word] = max(f.m[c.Word], c.Count)
	mu.Unlock()
	return nil
}

func (f *finalCounts) print() {
	words := make([]string, 0, len(f.m))
	for w := range f.m {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		fmt.Printf("%s %d\n", w, f.m[w])
	}
}
