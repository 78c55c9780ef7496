package mcdiff

import (
	"bytes"
	"strings"
)

// Normalize returns reply with what legitimately differs between two
// correct servers blanked, so that replies can be compared byte for byte:
//
//   - CAS values (gets/gats VALUE lines, the meta c flag, me's cas=): each
//     server numbers its writes its own way;
//   - the seconds in the meta t flag (TTL left, except -1), the l flag
//     (since last access) and me's exp= and la=: they are read off each
//     server's clock, which ticks once a second at its own phase;
//   - me's cls= and size=: memcached's slab layout.
//
// Value blocks are left alone.
func Normalize(reply []byte) []byte {
	var out []byte
	for len(reply) > 0 {
		nl := bytes.Index(reply, []byte("\r\n"))
		if nl < 0 {
			return append(out, reply...)
		}
		line := reply[:nl]
		reply = reply[nl+2:]
		out = append(append(out, normalizeLine(line)...), "\r\n"...)
		if n, ok := valueLen(line); ok && n >= 0 && n+2 <= len(reply) {
			out = append(out, reply[:n+2]...)
			reply = reply[n+2:]
		}
	}
	return out
}

func normalizeLine(line []byte) []byte {
	f := strings.Split(string(line), " ")
	switch {
	case f[0] == "VALUE":
		if len(f) == 5 {
			f[4] = "<cas>"
		}
	case f[0] == "ME":
		for i := 2; i < len(f); i++ {
			name, _, _ := strings.Cut(f[i], "=")
			switch name {
			case "exp", "la", "cas", "cls", "size":
				f[i] = name + "=<n>"
			}
		}
	case isMetaCode(f[0]):
		for i := 1; i < len(f); i++ {
			t := f[i]
			if t == "" {
				continue
			}
			switch t[0] {
			case 'c', 'l':
				f[i] = t[:1] + "<n>"
			case 't':
				if t != "t-1" {
					f[i] = "t<n>"
				}
			}
		}
	}
	return []byte(strings.Join(f, " "))
}

func isMetaCode(s string) bool {
	switch s {
	case "HD", "VA", "EN", "NF", "NS", "EX", "MN":
		return true
	}
	return false
}
