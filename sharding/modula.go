package sharding

import "slices"

// Modula is twemproxy's modula distribution (nc_modula.c): each server is
// repeated weight times, in order, and a hash picks slot hash % slots.
//
// twemproxy keeps one entry per slot. So does Modula while the slots are
// at most maxSlotTable; past that it keeps where each server's slots end
// and searches them, so that a large weight (up to MaxTotalWeight in all)
// costs no more memory than a small one.
type Modula struct {
	slots []int32  // server index per slot; nil when ends is used
	ends  []uint32 // each server's last slot + 1, in order
	total uint32   // the slots
}

var _ Distribution = (*Modula)(nil)

// maxSlotTable is the most slots Modula keeps a table entry for (256 KiB).
const maxSlotTable = 1 << 16

// NewModula builds the slot table over servers.
func NewModula(servers []Server) (*Modula, error) { return newModula(servers, maxSlotTable) }

func newModula(servers []Server, tableMax uint32) (*Modula, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	m := &Modula{ends: make([]uint32, 0, len(servers))}
	for _, s := range servers {
		m.total += uint32(s.Weight) // checkServers bounds the sum
		m.ends = append(m.ends, m.total)
	}
	if m.total <= tableMax {
		m.slots = make([]int32, 0, m.total)
		for i, s := range servers {
			for range s.Weight {
				m.slots = append(m.slots, int32(i))
			}
		}
	}
	return m, nil
}

// Pick returns the server of slot hash % slots.
func (m *Modula) Pick(hash uint32) int {
	slot := hash % m.total
	if m.slots != nil {
		return int(m.slots[slot])
	}
	// The first server whose slots end past slot (slot+1 <= total, so it
	// cannot wrap).
	i, _ := slices.BinarySearch(m.ends, slot+1)
	return i
}
