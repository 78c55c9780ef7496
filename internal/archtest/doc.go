// Package archtest holds no code: its test checks that the imports between
// shardproxy's packages follow the table in ARCHITECTURE.md (dependencies
// point down the table; only proxy sees everything) and that every
// third-party import is one the table allows.
package archtest
