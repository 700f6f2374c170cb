//go:build !linux

package storage

import "errors"

// lowPriority runs fn (the pass's reading and rewriting); only Linux
// lowers the priority of the thread it runs on (cleaner_priority_linux.go).
func lowPriority(fn func()) { fn() }

func threadNice() (int, error) { return 0, errors.New("not supported") }
