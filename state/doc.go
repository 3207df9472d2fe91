// Package state owns what a task keeps between records and how it is
// partitioned: key groups (the unit of keyed-state redistribution), the
// codecs that turn keys, values and records into bytes for snapshots, and
// the keyed state tables that operators read and write.
//
// Keyed state is partitioned into MaxParallelism key groups. A key's group is
// a stable hash of its encoded bytes modulo MaxParallelism, so it is the same
// in every process and every run; a subtask owns a contiguous range of key
// groups (KeyGroupRange), exactly as Flink assigns them.
package state
