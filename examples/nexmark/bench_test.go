package nexmark_test

import (
	"context"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/clinkstream/clink/examples/nexmark"
	"github.com/clinkstream/clink/sql"
)

// BenchmarkQuery runs the stateless queries over b.N events at parallelism
// 1 (go test -run '^$' -bench Query -benchmem ./examples/nexmark/): ns/op,
// B/op and allocs/op are per event, the job's start and final checkpoint
// included.
func BenchmarkQuery(b *testing.B) {
	for _, q := range []string{"q0", "q1", "q2", "q14", "q21", "q22"} {
		b.Run(q, func(b *testing.B) {
			script, err := nexmark.Script(q, nexmark.Params{Events: int64(b.N), BaseTime: testBaseTime})
			if err != nil {
				b.Fatal(err)
			}
			job, err := sql.Prepare(script, sql.Options{
				Stdout: io.Discard, Functions: nexmark.Functions(), Parallelism: 1,
				CheckpointDir: filepath.Join(b.TempDir(), strconv.Itoa(b.N)), CheckpointInterval: time.Second,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}
