package observe

import (
	"sync/atomic"
	"time"
)

// atomicDuration is a time.Duration read and written atomically.
type atomicDuration struct{ v atomic.Int64 }

func (a *atomicDuration) Load() time.Duration   { return time.Duration(a.v.Load()) }
func (a *atomicDuration) Store(d time.Duration) { a.v.Store(int64(d)) }
