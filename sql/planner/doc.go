// Package planner binds SQL statements against the catalog and plans them
// into a tree of physical operators over changelog rows.
//
// The binder resolves every name (tables, views, CTEs, columns) and types
// every expression with sql/expr; its errors name the table or column and
// the line and column where the statement wrote it. The planner then
// builds physical nodes directly (clink has no cost-based optimizer):
//
//	TableSourceScan   reads a table's physical columns
//	Calc              filter and projection, computed columns; kept row kind
//	WatermarkAssigner event time and watermarks of a table's rowtime column
//	GroupAggregate    GROUP BY / DISTINCT with retracting accumulators
//	WindowTableFunction TUMBLE/HOP/CUMULATE: a row per window it falls in
//	WindowAggregate   GROUP BY window_start, window_end over a window TVF
//	                  (or over the result of a window aggregation, whose
//	                  window columns then give a row's window): insert-only,
//	                  one row per key and window; TUMBLE over a PROCTIME()
//	                  column follows the wall clock
//	LookupJoin        JOIN t FOR SYSTEM_TIME AS OF proctime: each row joined
//	                  with a bounded table read whole (lookup.go)
//	Rank              ROW_NUMBER/RANK/DENSE_RANK Top-N per partition: updating
//	Deduplicate       Top-1 by the rowtime: first or last row per key
//	WindowRank        Top-N (or WindowDeduplicate) per window: insert-only
//	Union             UNION ALL of inputs with widened column types
//	Sink              writes into a table
//
// Each node says whether it is insert-only or updating (Flink's changelog
// mode), so the sink rules are checked at plan time: an updating query
// into an append-only sink is refused with Flink's message.
//
// Each node has a uid: its kind, a hint and a hash of its description and
// its inputs' uids. Planning the same script again yields the same uids,
// so a job restores from its own checkpoints; identical sub-plans of
// several INSERTs (the same table scanned twice) get the same uid, and the
// executor builds them once.
//
// Callers' duties:
//
//  1. Create the script's tables and views in the catalog in statement
//     order (CreateView needs the planner to validate the view's query
//     first: call BindView).
//  2. Plan every INSERT of one job with the same Planner, so that sink
//     uids stay unique and shared sub-plans are recognized.
//  3. Print Warnings to the user: they are not errors but matter (several
//     transactional sinks in one job).
package planner
