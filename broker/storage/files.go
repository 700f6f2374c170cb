package storage

import (
	"container/list"
	"os"
	"sync"
	"sync/atomic"
)

// FileCache bounds the segment files a broker keeps open (with
// one open file per segment, a node with many partitions runs out of
// descriptors and cannot even restart). Segments open their .log file
// when a read, write, fsync or truncation needs it and return it after;
// the cache closes the least recently used files nobody is using once more
// than Max are open. Every broker's logs share one (Config.Files); a nil
// cache opens files on first use and never closes them.
//
// Data written through a file that is closed later stays in the page
// cache; the next fsync of the segment reopens the file and flushes it.
type FileCache struct {
	Max int

	mu   sync.Mutex
	idle list.List // *segment with refs == 0 and an open file, most recent first
	open int

	Opens   atomic.Int64 // files opened (a reopen after eviction included)
	Evicted atomic.Int64 // files closed to stay within Max
}

// NewFileCache returns a cache keeping at most max files open (when none
// is in use; files in use are never closed).
func NewFileCache(max int) *FileCache { return &FileCache{Max: max} }

// Open is the number of segment files open now.
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// use returns the segment's open file, opening it if needed; the caller
// calls s.done() when it no longer needs it.
func (s *segment) use() (File, error) {
	c := s.cache
	if c == nil {
		s.fmu.Lock()
		defer s.fmu.Unlock()
		if s.f == nil {
			f, err := s.fs.OpenFile(s.path, os.O_RDWR, 0o644)
			if err != nil {
				return nil, err
			}
			s.f = f
		}
		return s.f, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.elem != nil {
		c.idle.Remove(s.elem)
		s.elem = nil
	}
	if s.f == nil {
		f, err := s.fs.OpenFile(s.path, os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		s.f = f
		c.open++
		c.Opens.Add(1)
	}
	s.refs++
	c.evictLocked()
	return s.f, nil
}

// done returns a file use() handed out.
func (s *segment) done() {
	c := s.cache
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.refs--
	if s.refs == 0 && s.f != nil && !s.gone {
		s.elem = c.idle.PushFront(s)
	}
	c.evictLocked()
}

func (c *FileCache) evictLocked() {
	for c.open > c.Max && c.idle.Len() > 0 {
		e := c.idle.Back()
		s := e.Value.(*segment)
		c.idle.Remove(e)
		s.elem = nil
		s.f.Close()
		s.f = nil
		c.open--
		c.Evicted.Add(1)
	}
}

// closeFile closes the segment's file for good (the log closes, or the
// segment is removed).
func (s *segment) closeFile() error {
	c := s.cache
	if c == nil {
		s.fmu.Lock()
		defer s.fmu.Unlock()
		s.gone = true
		if s.f == nil {
			return nil
		}
		err := s.f.Close()
		s.f = nil
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.gone = true
	if s.elem != nil {
		c.idle.Remove(s.elem)
		s.elem = nil
	}
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	c.open--
	return err
}
