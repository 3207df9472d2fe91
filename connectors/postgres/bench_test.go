package postgres

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
)

// benchInterval is the number of rows per checkpoint interval in the
// benchmark: about one second of input at the target rate.
const benchInterval = 50_000

// BenchmarkXASink writes b.N rows through one XA sink subtask, preparing
// and committing every benchInterval rows, into a logged table of the
// local server. It reports rows per wall second, per CPU second of the
// benchmark process, and per CPU second of the server backend that took
// the rows (read from /proc; the server must run on this machine for it).
//
//	go test -run '^$' -bench BenchmarkXASink -benchtime 1000000x ./connectors/postgres
func BenchmarkXASink(b *testing.B) {
	const table, uid = "clink_xa_bench", "xa_bench"
	newTable(b, table, "id bigint NOT NULL, name text NOT NULL", uid)
	cfg := xaConfig(table)
	cfg.BatchRows = DefaultBatchRows
	s := newXA(b, cfg)
	openDirect(b, s, connector.InitContext[Committable]{UID: uid, Parallelism: 1, PreviousGeneration: -1})
	var backend int
	if err := s.data.QueryRow(testCtx(b), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = "name-" + strconv.Itoa(i)
	}
	serverStart := procCPU(backend)
	cpuStart := selfCPU(b)
	start := time.Now()
	b.ResetTimer()
	ckpt := checkpoint.ID(0)
	commit := func() {
		ckpt++
		h, ok, err := s.PrepareCommit(ckpt)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			if err := s.Commit(h); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range b.N {
		if err := s.Write(row{ID: int64(i), Name: names[i%len(names)]}); err != nil {
			b.Fatal(err)
		}
		if (i+1)%benchInterval == 0 {
			commit()
		}
	}
	commit()
	b.StopTimer()
	wall, cpu := time.Since(start), selfCPU(b)-cpuStart
	rows := float64(b.N)
	b.ReportMetric(rows/wall.Seconds(), "rows/s")
	b.ReportMetric(rows/cpu.Seconds(), "rows/client-cpu-s")
	if serverStart >= 0 {
		if server := procCPU(backend) - serverStart; server > 0 {
			b.ReportMetric(rows/server.Seconds(), "rows/server-cpu-s")
			b.ReportMetric(rows/(cpu+server).Seconds(), "rows/cpu-s")
		}
	}
}

// selfCPU returns the process's user and system CPU time.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the user and system CPU time of process pid from
// /proc, or -1 when it cannot be read (the server runs elsewhere).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The fields after the command name, which is in parentheses.
	_, rest, ok := strings.Cut(string(data), ") ")
	if !ok {
		return -1
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}
