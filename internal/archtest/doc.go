// Package archtest holds no code. Its tests check that the imports between
// shardproxy's packages follow the table in ARCHITECTURE.md (dependencies
// point down the table; only proxy sees everything), that every
// third-party import is one the table allows, and that the functions of
// the whole repository keep within the complexity budget (cyclomatic
// complexity counted as gocyclo counts it).
package archtest
