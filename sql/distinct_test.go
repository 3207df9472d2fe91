package sql_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// TestCountDistinctRetractions feeds an updating input (the row count of
// each group of ids) into COUNT(DISTINCT) with and without FILTER, over an
// integer and a string: every update retracts the group's old count, whose
// distinct value goes back to zero unless another group holds it.
func TestCountDistinctRetractions(t *testing.T) {
	script := ids + `
CREATE TABLE p (one BOOLEAN, groups BIGINT, counts BIGINT, g1counts BIGINT, texts BIGINT) WITH ('connector' = 'print');
CREATE VIEW per_group AS SELECT g, COUNT(*) AS n FROM t GROUP BY g;
INSERT INTO p SELECT g >= 0, COUNT(*), COUNT(DISTINCT n), COUNT(DISTINCT n) FILTER (WHERE g = 1),
  COUNT(DISTINCT CAST(n AS VARCHAR)) FROM per_group GROUP BY g >= 0;`
	// Rows 1..10 go to groups 1, 2, 0, 1, 2, 0, ...: the counts per group
	// after each row, and after each the distinct counts of the outer
	// aggregate, retraction (-U) and addition (+U) apart.
	out := run(t, script, 1)
	// Group counts (g0, g1, g2) after rows 1..10 and the distinct sets
	// {n}, {n of g1}:
	//   1: (-,1,-)  {1} {1}      2: (-,1,1) {1} {1}      3: (1,1,1) {1} {1}
	//   4: (1,2,1)  {1,2} {2}    5: (1,2,2) {1,2} {2}    6: (2,2,2) {2} {2}
	//   7: (2,3,2)  {2,3} {3}    8: (2,3,3) {2,3} {3}    9: (3,3,3) {3} {3}
	//  10: (3,4,3)  {3,4} {4}
	want := strings.Join(materialize(t, out), "\n")
	if want != "[TRUE, 3, 2, 1, 2]" {
		t.Fatalf("final result %s, want [TRUE, 3, 2, 1, 2]\n%s", want, out)
	}
	// Row 6 retracts group 0's count 1 and adds 2: the distinct count of
	// the counts falls from 2 to 1 while the number of groups stays 3.
	if !slices.Contains(strings.Split(out, "\n"), "+U[TRUE, 3, 1, 1, 1]") {
		t.Fatalf("no update where a retracted count left the distinct set:\n%s", out)
	}
	for _, par := range []int{2, 3} {
		if got := materialize(t, run(t, script, par)); !slices.Equal(got, []string{"[TRUE, 3, 2, 1, 2]"}) {
			t.Errorf("parallelism %d: final result %v", par, got)
		}
	}
}

// TestCountDistinctRestore stops a job of COUNT(DISTINCT) over updating
// input after checkpoints and restores it: a value's entries (and the
// counts in them) come back, so every later retraction finds its value
// and the upsert table ends with the final counts. The first run has two
// subtasks, the restored one three.
func TestCountDistinctRestore(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) { testCountDistinctRestore(t, backend) })
	}
}

func testCountDistinctRestore(t *testing.T, backend string) {
	table := fmt.Sprintf("clink_count_distinct_%s_%d", backend, time.Now().UnixNano())
	pgTable(t, table, "g bigint PRIMARY KEY, keys bigint NOT NULL, counts bigint NOT NULL, late bigint NOT NULL, texts bigint NOT NULL, total bigint NOT NULL")
	script := fmt.Sprintf(`
CREATE TABLE s (id BIGINT, k AS id %% 40, u AS id %% 37) WITH ('connector' = 'datagen', 'rows-per-second' = '400',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '600');
CREATE TABLE pg (g BIGINT, keys BIGINT, counts BIGINT, late BIGINT, texts BIGINT, total BIGINT, PRIMARY KEY (g) NOT ENFORCED) WITH (
  'connector' = 'postgres', 'url' = '%s', 'username' = 'postgres', 'table-name' = '%s');
SET 'execution.checkpointing.interval' = '50ms';
SET 'state.backend' = '%s';
INSERT INTO pg SELECT k %% 3, COUNT(*), COUNT(DISTINCT n), COUNT(DISTINCT n) FILTER (WHERE last > 300),
  COUNT(DISTINCT CAST(n AS VARCHAR)), SUM(us)
FROM (SELECT k, COUNT(*) AS n, MAX(id) AS last, COUNT(DISTINCT u) AS us FROM s GROUP BY k) GROUP BY k %% 3;`, jdbcURL(), table, backend)
	dir := runStoppedMidway(t, script)
	mid := pgRows(t, "SELECT g, keys, counts, late, texts, total FROM "+table)
	// The restored job runs on three subtasks: the groups' key groups, and
	// the values' entries with them, move to other subtasks.
	var second bytes.Buffer
	if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 3, CheckpointDir: dir, Restore: "latest", Stdout: &second, Stderr: &second}); err != nil {
		t.Fatalf("restored run: %v\n%s", err, second.String())
	}
	// Each k of 0..39 ends with 15 rows, the last above 300, and 15
	// distinct u (its ids are k + 40i, 15 of them, apart by 40, which 37
	// does not divide within 15 steps). Groups k %% 3: 14, 13 and 13 keys.
	want := []string{"0|14|1|1|1|210", "1|13|1|1|1|195", "2|13|1|1|1|195"}
	if got := pgRows(t, "SELECT g, keys, counts, late, texts, total FROM "+table); !slices.Equal(got, want) {
		t.Fatalf("table %v, want %v (after the first run: %v)", got, want, mid)
	}
	if slices.Equal(mid, want) {
		t.Fatalf("the first run wrote the final table already: the test needs a job stopped midway")
	}
}
