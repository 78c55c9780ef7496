package resp

import "shardproxy/codec"

// cmdFunctionStats is FUNCTION STATS, which Merge singles out.
var cmdFunctionStats = lookup("function|stats")

// mergeFunctionStats answers FUNCTION STATS: the script running on a
// server (running_script; the first server's that runs one, else its
// null), and the engines' counts of the first server (FUNCTION LOAD goes
// to every server, so each has the same libraries). A server busy in a
// script answers it, so a client can see what to FUNCTION KILL.
func mergeFunctionStats(dst []byte, proto uint8, replies []codec.Reply) ([]byte, bool) {
	var running, engines []byte
	for i, r := range replies {
		vals, ok := readFields(r.Raw)
		if !ok {
			return dst, false
		}
		for j := 0; j < len(vals); j += 2 {
			key, _, ok := readString(vals[j])
			if !ok {
				return dst, false
			}
			switch string(key) {
			case "running_script":
				if running == nil || (isNull(running) && !isNull(vals[j+1])) {
					running = vals[j+1]
				}
			case "engines":
				if i == 0 {
					engines = vals[j+1]
				}
			}
		}
	}
	if running == nil || engines == nil {
		return dst, false
	}
	dst = appendFieldsHeader(dst, 2, proto)
	dst = append(dst, "$14\r\nrunning_script\r\n"...)
	dst = append(dst, running...)
	dst = append(dst, "$7\r\nengines\r\n"...)
	return append(dst, engines...), true
}

// isNull reports whether the whole reply raw is a null: "$-1", "*-1" or
// RESP3's "_".
func isNull(raw []byte) bool {
	s := string(raw)
	return s == "$-1\r\n" || s == "*-1\r\n" || s == "_\r\n"
}
