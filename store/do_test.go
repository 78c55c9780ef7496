package store

import (
	"strings"
	"testing"
	"time"

	"shardproxy/internal/mcdiff"
	"shardproxy/internal/testserver"
)

// step is one request of a transcript and the reply memcached gives.
type step struct {
	send, want string
	casKey     string // the key whose last CAS mcdiff.CASMark in send stands for
}

// transcripts are request/reply sequences observed on memcached 1.6.18;
// each runs on a fresh store, and on a fresh memcached unless -short, and
// the replies must match after mcdiff.Normalize (CAS values, TTL seconds).
var transcripts = map[string][]step{
	"set get gets": {
		{send: "set a 5 0 3\r\nabc\r\n", want: "STORED\r\n"},
		{send: "get a b a\r\n", want: "VALUE a 5 3\r\nabc\r\nVALUE a 5 3\r\nabc\r\nEND\r\n"},
		{send: "gets a\r\n", want: "VALUE a 5 3 1\r\nabc\r\nEND\r\n"},
		{send: "set a 4294967296 0 1\r\nx\r\n", want: "STORED\r\n"}, // flags keep 32 bits
		{send: "get a\r\n", want: "VALUE a 0 1\r\nx\r\nEND\r\n"},
		{send: "set a -1 0 1\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{send: "set a 0 0 -1\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{send: "set a 0 0\r\n", want: "ERROR\r\n"},
		{send: "get\r\n", want: "ERROR\r\n"},
		{send: "set a 0 0 1 noreply\r\ny\r\n", want: ""},
		{send: "set a 0 0 2\r\nabXY", want: "CLIENT_ERROR bad data chunk\r\n"},
		{send: "set a 0 0 2 noreply\r\nabXY", want: ""},
		{send: "get a\r\n", want: "VALUE a 0 1\r\ny\r\nEND\r\n"},
		{send: "get a " + strings.Repeat("x", 251) + "\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
	},
	"add replace append prepend": {
		{send: "add a 0 0 1\r\n1\r\n", want: "STORED\r\n"},
		{send: "add a 0 0 1\r\n2\r\n", want: "NOT_STORED\r\n"},
		{send: "replace b 0 0 1\r\n2\r\n", want: "NOT_STORED\r\n"},
		{send: "replace a 7 0 1\r\n2\r\n", want: "STORED\r\n"},
		{send: "append a 9 0 2\r\n34\r\n", want: "STORED\r\n"},
		{send: "prepend a 9 0 2\r\n01\r\n", want: "STORED\r\n"},
		{send: "append b 0 0 1\r\nx\r\n", want: "NOT_STORED\r\n"},
		{send: "get a\r\n", want: "VALUE a 7 5\r\n01234\r\nEND\r\n"}, // flags of the original item
	},
	"cas": {
		{send: "cas a 0 0 1 1\r\nx\r\n", want: "NOT_FOUND\r\n"},
		{send: "set a 0 0 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "gets a\r\n", want: "VALUE a 0 1 2\r\nx\r\nEND\r\n"},
		{send: "cas a 0 0 1 " + mcdiff.CASMark + "\r\ny\r\n", casKey: "a", want: "STORED\r\n"},
		{send: "cas a 0 0 1 " + mcdiff.CASMark + "\r\nz\r\n", casKey: "a", want: "EXISTS\r\n"},
		{send: "cas a 0 0 1 0\r\nz\r\n", want: "EXISTS\r\n"},
		{send: "cas a 0 0 1 abc\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{send: "get a\r\n", want: "VALUE a 0 1\r\ny\r\nEND\r\n"},
	},
	"incr decr": {
		{send: "incr n 1\r\n", want: "NOT_FOUND\r\n"},
		{send: "set n 0 0 3\r\n100\r\n", want: "STORED\r\n"},
		{send: "decr n 1\r\n", want: "99\r\n"},
		{send: "get n\r\n", want: "VALUE n 0 3\r\n99 \r\nEND\r\n"}, // rewritten in place, padded
		{send: "incr n 18446744073709551615\r\n", want: "98\r\n"},  // wraps at 2^64
		{send: "incr n 902\r\n", want: "1000\r\n"},                 // longer: a new item
		{send: "get n\r\n", want: "VALUE n 0 4\r\n1000\r\nEND\r\n"},
		{send: "decr n 5000\r\n", want: "0\r\n"}, // stops at zero
		{send: "incr n -1\r\n", want: "CLIENT_ERROR invalid numeric delta argument\r\n"},
		{send: "incr n abc noreply\r\n", want: ""},
		{send: "set n 0 0 20\r\n18446744073709551615\r\n", want: "STORED\r\n"},
		{send: "incr n 1\r\n", want: "0\r\n"},
		{send: "set n 0 0 4\r\n12ab\r\n", want: "STORED\r\n"},
		{send: "incr n 1\r\n", want: "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{send: "set n 0 0 5\r\n12 ab\r\n", want: "STORED\r\n"},
		{send: "incr n 1\r\n", want: "13\r\n"}, // a number ends at white space
		{send: "set n 0 0 0\r\n\r\n", want: "STORED\r\n"},
		{send: "decr n 1\r\n", want: "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
	},
	"touch delete ttl": {
		{send: "set a 0 -1 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "get a\r\n", want: "END\r\n"}, // negative: expired at once
		{send: "set a 0 1000000000 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "get a\r\n", want: "END\r\n"}, // absolute time in the past
		{send: "set a 0 0 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "touch a abc\r\n", want: "CLIENT_ERROR invalid exptime argument\r\n"},
		{send: "touch a 100\r\n", want: "TOUCHED\r\n"},
		{send: "mg a t\r\n", want: "HD t100\r\n"},
		{send: "touch b 100\r\n", want: "NOT_FOUND\r\n"},
		{send: "gat -1 a\r\n", want: "VALUE a 0 1\r\nx\r\nEND\r\n"},
		{send: "get a\r\n", want: "END\r\n"},
		{send: "delete a\r\n", want: "NOT_FOUND\r\n"},
		{send: "set a 0 0 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "delete a 5\r\n", want: "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"},
		{send: "delete a 0\r\n", want: "DELETED\r\n"},
		{send: "delete a 0 noreply\r\n", want: ""},
		{send: "delete a b c d\r\n", want: "ERROR\r\n"},
	},
	"too large": {
		{send: "set k 0 0 1048516\r\n" + strings.Repeat("v", 1048516) + "\r\n", want: "STORED\r\n"},
		{send: "set k 0 0 1048517\r\n" + strings.Repeat("v", 1048517) + "\r\n", want: "SERVER_ERROR object too large for cache\r\n"},
		{send: "get k\r\n", want: "END\r\n"}, // a refused set removes the old item
		{send: "set k 1 0 1048512\r\n" + strings.Repeat("v", 1048512) + "\r\n", want: "STORED\r\n"},
		{send: "append k 0 0 1\r\nv\r\n", want: "NOT_STORED\r\n"},
		{send: "set k 1 0 1048513\r\n" + strings.Repeat("v", 1048513) + "\r\n", want: "SERVER_ERROR object too large for cache\r\n"},
	},
	"meta get": {
		{send: "mg a v\r\n", want: "EN\r\n"},
		{send: "mg a v q k Oxy\r\n", want: ""},
		{send: "mg a k Oxy\r\n", want: "EN ka Oxy\r\n"},
		{send: "ms a 3 T0 F5\r\nabc\r\n", want: "HD\r\n"},
		{send: "mg a\r\n", want: "HD\r\n"},
		{send: "mg a s v f t h k O123 q\r\n", want: "VA 3 s3 f5 t-1 h1 ka O123\r\nabc\r\n"},
		{send: "mg a h l\r\n", want: "HD h1 l0\r\n"},
		{send: "mg YQ== b k v\r\n", want: "VA 3 ka\r\nabc\r\n"},
		{send: "mg YQ b v\r\n", want: "CLIENT_ERROR error decoding key\r\n"},
		{send: "mg a v v\r\n", want: "CLIENT_ERROR duplicate flag\r\n"},
		{send: "mg a z\r\n", want: "CLIENT_ERROR invalid flag\r\n"},
		{send: "mg a Tx\r\n", want: "CLIENT_ERROR bad token in command line format\r\n"},
		{send: "mg a O" + strings.Repeat("o", 32) + "\r\n", want: "CLIENT_ERROR opaque token too long\r\n"},
		{send: "mg a T30 t\r\n", want: "HD t30\r\n"},
		{send: "mg\r\n", want: "ERROR\r\n"},
	},
	"meta set": {
		{send: "ms a\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{send: "ms a 2 MZ\r\nhi\r\n", want: "CLIENT_ERROR invalid mode for ms M token\r\n"},
		{send: "ms a 2 MEE\r\nhi\r\n", want: "CLIENT_ERROR incorrect length for M token\r\n"},
		{send: "ms a 2 MR\r\nhi\r\n", want: "NS\r\n"},
		{send: "ms a 2 ME c k\r\nhi\r\n", want: "HD c1 ka\r\n"},
		{send: "ms a 2 ME c\r\nho\r\n", want: "NS c0\r\n"},
		{send: "ms a 1 MA q\r\n!\r\n", want: ""},
		{send: "ms a 1 MP\r\n<\r\n", want: "HD\r\n"},
		{send: "mg a v\r\n", want: "VA 4\r\n<hi!\r\n"},
		{send: "ms a 1 C1 q\r\nx\r\n", want: "EX\r\n"},
		{send: "ms b 1 C1\r\nx\r\n", want: "NF\r\n"},
		{send: "ms a 2 q T0\r\nabXY", want: "CLIENT_ERROR bad data chunk\r\n"},
		{send: "ms AAFr 1 b k\r\nx\r\n", want: "HD kAAFr b\r\n"},
		{send: "mg AAFr b k v\r\n", want: "VA 1 kAAFr b\r\nx\r\n"},
		{send: "ms a 2000000\r\n" + strings.Repeat("x", 2000000) + "\r\n", want: "SERVER_ERROR object too large for cache\r\n"},
		{send: "mg a\r\n", want: "EN\r\n"},
	},
	"meta delete and arithmetic": {
		{send: "md a\r\n", want: "NF\r\n"},
		{send: "md a q Oz k\r\n", want: "NF Oz ka\r\n"},
		{send: "ms a 1\r\n1\r\n", want: "HD\r\n"},
		{send: "md a C999\r\n", want: "EX\r\n"},
		{send: "md a q\r\n", want: ""},
		{send: "md a zz\r\n", want: "CLIENT_ERROR invalid or duplicate flag\r\n"},
		{send: "ma a\r\n", want: "NF\r\n"},
		{send: "ma a N0 J10 v t\r\n", want: "VA 2 t-1\r\n10\r\n"},
		{send: "ma a v MD D3 c\r\n", want: "VA 1 c2\r\n7\r\n"},
		{send: "mg a v\r\n", want: "VA 2\r\n7 \r\n"},
		{send: "ma a q v\r\n", want: ""},
		{send: "ma a MX\r\n", want: "CLIENT_ERROR invalid mode for ma M token\r\n"},
		{send: "ma a Dx\r\n", want: "CLIENT_ERROR invalid or duplicate flag\r\n"},
		{send: "ms a 1\r\nx\r\n", want: "HD\r\n"},
		{send: "ma a\r\n", want: "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{send: "mn\r\n", want: "MN\r\n"},
	},
	"stale and win": {
		{send: "mg a N30 v c k\r\n", want: "VA 0 c1 ka W\r\n\r\n"}, // a miss vivifies, the caller wins
		{send: "mg a N30 v\r\n", want: "VA 0 Z\r\n\r\n"},           // others see the token taken
		{send: "ms a 1 T60\r\nx\r\n", want: "HD\r\n"},
		{send: "mg a v c k\r\n", want: "VA 1 c2 ka\r\nx\r\n"},
		{send: "md a I T30\r\n", want: "HD\r\n"},
		{send: "mg a v c\r\n", want: "VA 1 c3 X W\r\nx\r\n"},
		{send: "mg a v\r\n", want: "VA 1 Z X\r\nx\r\n"},
		{send: "ms a 1 I C" + mcdiff.CASMark + "\r\ny\r\n", casKey: "a", want: "HD\r\n"}, // an older CAS stores as stale
		{send: "mg a v t\r\n", want: "VA 1 t30 Z X\r\ny\r\n"},
		{send: "ms a 1\r\nz\r\n", want: "HD\r\n"},
		{send: "mg a v R100\r\n", want: "VA 1\r\nz\r\n"},
		{send: "ms a 1 T50\r\nz\r\n", want: "HD\r\n"},
		{send: "mg a R100\r\n", want: "HD W\r\n"}, // TTL below the recache time wins
		{send: "mg a R100\r\n", want: "HD Z\r\n"},
	},
	"commands outside the store": {
		{send: "bogus\r\n", want: "ERROR\r\n"},
		{send: "me a\r\n", want: "EN\r\n"},
		{send: "set a 0 0 1\r\nx\r\n", want: "STORED\r\n"},
		{send: "me a\r\n", want: "ME a exp=-1 la=0 cas=1 fetch=no cls=1 size=63\r\n"},
		// me with b decodes its key: a binary key is named in base64, a
		// text one as it is; a key that does not decode is refused.
		{send: "ms YmluYXJ5 1 b\r\nx\r\n", want: "HD\r\n"},
		{send: "me YmluYXJ5 b\r\n", want: "ME YmluYXJ5 exp=-1 la=0 cas=2 fetch=no cls=1 size=66\r\n"},
		{send: "me YQ== b\r\n", want: "ME a exp=-1 la=0 cas=1 fetch=no cls=1 size=63\r\n"},
		{send: "me YmluYXJ b\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
	},
}

func TestTranscripts(t *testing.T) {
	for name, steps := range transcripts {
		t.Run(name, func(t *testing.T) {
			s := New(Config{})
			defer s.Close()
			runTranscript(t, "store", mcdiff.NewSession(storeTarget(s)), steps)
			if testing.Short() {
				return
			}
			mc := testserver.StartMemcached(t)
			conn, err := mcdiff.Dial(mc.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			runTranscript(t, "memcached", mcdiff.NewSession(conn), steps)
		})
	}
}

func runTranscript(t *testing.T, who string, sess *mcdiff.Session, steps []step) {
	t.Helper()
	for i, st := range steps {
		got, err := sess.Do(mcdiff.Request{Wire: []byte(st.send), CASKey: st.casKey})
		if err != nil {
			t.Fatalf("%s: step %d %q: %v", who, i, st.send, err)
		}
		if g, w := mcdiff.Normalize(got), mcdiff.Normalize([]byte(st.want)); string(g) != string(w) {
			t.Errorf("%s: step %d %.80q:\n got %.200q\nwant %.200q", who, i, st.send, got, st.want)
		}
	}
}

// The store answers nothing to memcached commands that 1.6.45's
// mcp.internal does not handle.
func TestUnhandledCommands(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	for _, c := range []string{"stats\r\n", "version\r\n", "flush_all\r\n", "verbosity 1\r\n", "quit\r\n", "watch\r\n"} {
		if got := s.Do(nil, []byte(c)); len(got) != 0 {
			t.Errorf("%q: got %q, want nothing", c, got)
		}
	}
}

// fakeClock is a settable clock for expiry tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
