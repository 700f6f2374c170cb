package storage

import (
	"io/fs"
	"os"

	"github.com/strand-io/strand/broker/storage/vfs"
)

// FS is the file system a log keeps its files on (package vfs says what
// it must do). Every file operation of this package goes through one, so
// that a test can put a broker's logs on a simulated disk that loses what
// was not fsynced when its node crashes (testkit/simdisk). OSFS is the
// real one; a nil FS anywhere in this package means OSFS.
type FS = vfs.FS

// File is an open file of an FS. Segment files are read and written with
// ReadAt and WriteAt (no memory mapping: the indexes are read whole into
// memory and written with plain writes), so any FS can hold them.
type File = vfs.File

// OSFS is the operating system's file system. It is the only place in
// this package that calls package os's file functions.
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in an interface
	}
	return f, nil
}

// ReadFile implements FS.
func (OSFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// RemoveAll implements FS.
func (OSFS) RemoveAll(path string) error { return os.RemoveAll(path) }

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// ReadDir implements FS.
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat implements FS.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// orOS is fsys, or OSFS when it is nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return OSFS{}
	}
	return fsys
}
