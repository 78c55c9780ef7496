// Package spool keeps, per pool, the deletes that could not reach their
// server, so that the server is sent them before it serves again.
//
// A Spool is one append-only file and, in memory, each server's pending
// keys in the order they were appended. The file starts with an 8-byte
// magic ("SPDEL01\n"); every record after it is
//
//	length  uint32 little endian: the body's length (1 to MaxBody)
//	crc     uint32 little endian: CRC32C (Castagnoli) of the body
//	body    op byte, server length byte, server, then the rest:
//	        OpDelete: the key;
//	        OpDone:   a uint32 little endian count n: the server's
//	                  first n pending keys were replayed.
//
// Open reads the file: every whole record is applied in order, and the
// first record that is cut short, has a bad length or a bad checksum ends
// the file there: it and what follows are cut (the file is truncated),
// logged with the file and offset, and counted (Stats.CorruptTailCut).
// It then rewrites the file with the pending records only (compaction), as
// it does when the last pending key is replayed (the file goes back to
// its magic) and when an append would pass MaxBytes.
//
// Fsync: FsyncAlways syncs each append before Append returns, so a
// delete is on disk before its client has a reply; FsyncInterval syncs
// every Interval when something was written; FsyncNever leaves it to the
// kernel. Done records are never synced on their own: a replay lost in a
// crash is sent again, and a delete is idempotent.
//
// The package imports nothing of shardproxy: servers and keys are bytes.
// All methods of Spool are safe for concurrent use; Append takes the
// spool's lock and, under FsyncAlways, waits for the disk.
package spool
