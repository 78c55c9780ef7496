package sharding

// Modula is twemproxy's modula distribution (nc_modula.c): each server is
// repeated weight times, in order, and a hash picks slot hash % slots.
type Modula struct {
	slots []int32 // server index per slot
}

var _ Distribution = (*Modula)(nil)

// NewModula builds the slot table over servers.
func NewModula(servers []Server) (*Modula, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	n := 0
	for _, s := range servers {
		n += s.Weight
	}
	m := &Modula{slots: make([]int32, 0, n)}
	for i, s := range servers {
		for range s.Weight {
			m.slots = append(m.slots, int32(i))
		}
	}
	return m, nil
}

// Pick returns the server of slot hash % slots.
func (m *Modula) Pick(hash uint32) int {
	return int(m.slots[hash%uint32(len(m.slots))])
}
