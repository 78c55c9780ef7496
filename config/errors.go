package config

import (
	"errors"
	"strconv"
	"strings"
)

// maxErrors is how many problems Parse reports before it stops looking.
const maxErrors = 10

// Error is one problem in a configuration, located as precisely as the YAML
// allows. Its message reads
//
//	config: FILE:LINE: pool "NAME": KEY: MSG
//
// with the parts that do not apply left out.
type Error struct {
	// Source is the file path or Inline.
	Source string
	// Line is 1-based; 0 when the problem has no line (an empty file).
	Line int
	// Pool is the pool's name, "" for problems outside any pool.
	Pool string
	// Key is the pool key the problem is about, "" for none.
	Key string
	// Msg says what is wrong.
	Msg string
}

// Error implements the error interface.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	b.WriteString(e.Source)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Pool != "" {
		b.WriteString("pool ")
		b.WriteString(strconv.Quote(e.Pool))
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// errorList collects the problems of one Parse.
type errorList struct {
	source string
	errs   []error
}

// add records a problem, up to maxErrors of them.
func (l *errorList) add(line int, pool, key, msg string) {
	if len(l.errs) >= maxErrors {
		return
	}
	l.errs = append(l.errs, &Error{Source: l.source, Line: line, Pool: pool, Key: key, Msg: msg})
	if len(l.errs) == maxErrors {
		l.errs = append(l.errs, &Error{Source: l.source, Msg: "too many errors"})
	}
}

// full reports whether no more problems are wanted.
func (l *errorList) full() bool { return len(l.errs) >= maxErrors }

// err returns nil, the one problem, or all of them joined.
func (l *errorList) err() error {
	switch len(l.errs) {
	case 0:
		return nil
	case 1:
		return l.errs[0]
	}
	return errors.Join(l.errs...)
}
