// Package postgres writes a stream into a PostgreSQL table, in one of two
// ways.
//
// XASink is a connector.CommittingSink: each subtask writes the rows of a
// checkpoint interval into one open transaction (with COPY), prepares it
// with PREPARE TRANSACTION at the checkpoint's barrier, and commits it with
// COMMIT PREPARED once the checkpoint is durable. Rows appear exactly once,
// also across crashes and restores. The server must allow prepared
// transactions (max_prepared_transactions above 0).
//
// UpsertSink is a plain sink of changelog rows for a table with a primary
// key: inserts and updates become INSERT ... ON CONFLICT DO UPDATE, deletes
// become DELETE by key, netted by key and applied at every checkpoint
// barrier. It is not two-phase commit: a restored job writes some rows
// again, and the table converges to the same final state because every
// statement is keyed and idempotent.
//
// A sink's user must:
//
//  1. Create the table beforehand; the sinks never create or alter it.
//  2. Give the sink operator a stable name (its uid): the XA sink's
//     transaction ids carry it, and a restored job finds its prepared
//     transactions by it.
//  3. Not run two jobs with one sink uid against one server.
//
// See docs/postgres.md for the options, the transaction id format and what
// happens to prepared transactions after a crash.
package postgres
