package proxy

import (
	"sync"
	"time"
)

// nearStore is what a near cache needs of the in-process store.
//
// TEMPORARY: a plain map stands in until package store lands; then this
// file becomes the adapter of store.Store.
type nearStore interface {
	Get(key string) (value []byte, flags uint32, cas uint64, ok bool)
	Set(key string, value []byte, flags uint32, ttl time.Duration) (uint64, error)
	Delete(key string) bool
	Close()
}

type mapStore struct {
	mu sync.Mutex
	m  map[string]mapItem
}

type mapItem struct {
	v     []byte
	flags uint32
	exp   time.Time
}

func openNearStore(int64, int) nearStore { return &mapStore{m: map[string]mapItem{}} }

func (s *mapStore) Get(key string) ([]byte, uint32, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.m[key]
	if !ok || time.Now().After(it.exp) {
		return nil, 0, 0, false
	}
	return it.v, it.flags, 0, true
}

func (s *mapStore) Set(key string, value []byte, flags uint32, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = mapItem{append([]byte(nil), value...), flags, time.Now().Add(ttl)}
	return 0, nil
}

func (s *mapStore) Delete(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	delete(s.m, key)
	return ok
}

func (s *mapStore) Close() {}

func storeUsage(s nearStore) (items, bytes, evictions int64) {
	ms := s.(*mapStore)
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return int64(len(ms.m)), 0, 0
}
