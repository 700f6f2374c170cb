// Package vfs declares the file-system interface package storage keeps its
// files through (storage.FS, storage.File are these types): the real file
// system (storage.OSFS) or a simulated disk (testkit/simdisk). It is a
// package of its own, importing nothing of Strand's, so that a simulated
// disk can implement it without importing package storage.
package vfs

import (
	"io"
	"io/fs"
)

// FS is a file system: the operations package storage performs on a
// partition's files and the broker's checkpoints.
//
// Paths are the operating system's (filepath.Join of the data directory
// and names below it). Errors follow package os's conventions: a missing
// file is an error for which errors.Is(err, fs.ErrNotExist) (and
// os.IsNotExist) holds.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_TRUNC, O_APPEND, O_EXCL).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// ReadFile returns the whole content of name.
	ReadFile(name string) ([]byte, error)
	Remove(name string) error
	RemoveAll(path string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm fs.FileMode) error
	// ReadDir lists a directory sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir fsyncs a directory, making the creations, renames and
	// removals of entries in it durable.
	SyncDir(dir string) error
}

// File is an open file of an FS. Data written is durable only once Sync
// returns nil (or the file was written by an atomic write-fsync-rename).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Sync makes the file's content durable (fsync).
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Name() string
}
