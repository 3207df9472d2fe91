// Package metrics owns clink's Prometheus registry and the names of the
// metrics clink exports.
//
// The checkpoint driver reports once per checkpoint, so those calls update
// Prometheus collectors directly. Tasks are different: they count every
// record, and a Prometheus counter per record would put a label lookup and a
// shared cache line on the hot path. A task therefore takes its
// OperatorCounters once, when it starts, and bumps plain atomics; a custom
// collector reads them only when Prometheus scrapes.
//
// Callers:
//
//  1. Create one Registry per process with New and serve Handler on the
//     metrics endpoint.
//  2. When a task starts, call Operator once per chained operator and keep
//     the returned *OperatorCounters; add to In and Out per record or per
//     batch.
//  3. The checkpoint driver calls ModeStamped for every triggered checkpoint,
//     AdaptiveSwitch for every policy flip, AlignmentTime for every
//     multi-input task that aligned, and exactly one of CheckpointCompleted
//     (after CheckpointPhases) or CheckpointAborted when the checkpoint ends.
//  4. The restart loop calls JobRestarted once per whole-job restart.
//  5. Summary gives a consistent-enough snapshot for status lines and tests;
//     it never blocks a task.
//
// Every method is safe for concurrent use. This package imports no other
// clink package, so that every layer may report to it.
package metrics
