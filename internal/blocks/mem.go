package blocks

import (
	"context"
	"fmt"
	"sync"
)

// MemStore is a Store held in memory: the in-process fake for tests and
// the cache of a node that has no disk to spare. The zero value is not
// usable; call NewMemStore.
type MemStore struct {
	mu     sync.RWMutex
	blocks map[ID][]byte
	bytes  int64
}

var (
	_ ownStore       = (*MemStore)(nil)
	_ VerifiedPutter = (*MemStore)(nil)
	_ BlockReader    = (*MemStore)(nil)
)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{blocks: make(map[ID][]byte)} }

// Has reports whether s holds id.
func (s *MemStore) Has(ctx context.Context, id ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("has block %s: %w", id.Short(), err)
	}
	s.mu.RLock()
	_, ok := s.blocks[id]
	s.mu.RUnlock()
	return ok, nil
}

// Get returns a copy of the bytes of id.
func (s *MemStore) Get(ctx context.Context, id ID) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get block %s: %w", id.Short(), err)
	}
	s.mu.RLock()
	data, ok := s.blocks[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get block %s: %w", id.Short(), ErrNotFound)
	}
	return append([]byte(nil), data...), nil
}

// Put stores a copy of data under id.
func (s *MemStore) Put(ctx context.Context, id ID, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if err := CheckBlock(id, data); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return s.putHashed(ctx, id, data)
}

// PutVerified is Put without re-hashing: v was checked against its ID.
func (s *MemStore) PutVerified(ctx context.Context, v Verified) error {
	return s.putHashed(ctx, v.id, v.data)
}

// ReadBlock copies id into buf (reallocated if too small) and returns it.
// A MemStore's blocks never leave memory, so there is nothing to check.
func (s *MemStore) ReadBlock(ctx context.Context, id ID, buf []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read block %s: %w", id.Short(), err)
	}
	s.mu.RLock()
	data, ok := s.blocks[id]
	if ok {
		buf = append(buf[:0], data...)
	}
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("read block %s: %w", id.Short(), ErrNotFound)
	}
	return buf, nil
}

// putHashed is Put without re-hashing data: the caller has just computed
// id from it.
func (s *MemStore) putHashed(ctx context.Context, id ID, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put block %s: %w", id.Short(), err)
	}
	if len(data) > MaxBlockSize {
		return fmt.Errorf("put block %s: %d bytes: %w", id.Short(), len(data), ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blocks[id]; !ok {
		s.blocks[id] = append(make([]byte, 0, len(data)), data...)
		s.bytes += int64(len(data))
	}
	return nil
}

// Delete removes id.
func (s *MemStore) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete block %s: %w", id.Short(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if data, ok := s.blocks[id]; ok {
		s.bytes -= int64(len(data))
		delete(s.blocks, id)
	}
	return nil
}

// List calls fn for every block, on a snapshot taken when List starts, so
// fn may call back into s.
func (s *MemStore) List(ctx context.Context, fn func(id ID, size int64) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list blocks: %w", err)
	}
	type entry struct {
		id   ID
		size int64
	}
	s.mu.RLock()
	snap := make([]entry, 0, len(s.blocks))
	for id, data := range s.blocks {
		snap = append(snap, entry{id, int64(len(data))})
	}
	s.mu.RUnlock()
	for _, e := range snap {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list blocks: %w", err)
		}
		if err := fn(e.id, e.size); err != nil {
			return err
		}
	}
	return nil
}

// Usage returns how many blocks s holds and their total length.
func (s *MemStore) Usage() (blocks int, bytes int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.blocks), s.bytes
}
