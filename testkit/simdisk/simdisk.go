// Package simdisk is an in-memory disk for deterministic cluster
// simulations: one FS per node, given to the node as node.Config.FS (it
// implements storage.FS), which a test crashes to lose what the node had
// not fsynced.
//
// The model. Each file has its durable content (as of its last successful
// Sync) and its current content, plus the writes and truncations made
// since that Sync, in order. Reads see the current content. Crash puts
// every file back to its durable content; CrashTorn also lets an ordered
// prefix of the pending writes survive, the last of them cut short (a
// torn tail), as a disk that was writing back the page cache when the
// power went.
//
// Directory operations (creating a file, rename, remove, mkdir) are
// durable at once, and SyncDir only checks the directory exists (and
// honours the fault hooks). Strand fsyncs directories after its atomic
// replacements (temp file, fsync, rename, directory fsync) and after
// setting a log's directory aside, but not after creating or removing
// segment files, so modelling directory entries as lost until a
// directory fsync would lose files Strand relies on the file system's
// journal for; the data inside a file, which Strand does fsync
// consistently, is what a crash loses here.
//
// Fault hooks: FailNextSync makes the next fsync of a path under a
// prefix fail with EIO (the pending writes stay pending, so a crash
// still loses them), and Stall blocks writes and fsyncs until released or
// until its context ends. Nothing here starts a goroutine or blocks on
// anything but channels, so an FS works inside a testing/synctest bubble.
package simdisk

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strand-io/strand/broker/storage/vfs"
)

// FS is one node's simulated disk. Its methods are safe for concurrent use.
type FS struct {
	mu    sync.Mutex
	now   func() time.Time
	files map[string]*inode // by clean path
	dirs  map[string]bool
	gen   uint64 // bumped by a crash: older handles are dead
	// failSync lists the one-shot fsync failures armed, oldest first.
	failSync []failure
	// stall, when not nil, holds writes and fsyncs until it is closed
	// (Release) or stallCtx ends.
	stall    chan struct{}
	stallCtx context.Context
	// crashed is closed by a crash, waking stalled operations of the
	// process that died.
	crashed chan struct{}
}

type failure struct {
	prefix string
	err    error
}

// op is a write (data at off) or, when trunc, a truncation to size off.
type op struct {
	off   int64
	data  []byte
	trunc bool
}

type inode struct {
	data    []byte // current content
	durable []byte // content as of the last Sync
	pending []op   // since the last Sync, in order
	mtime   time.Time
}

var _ vfs.FS = (*FS)(nil)

// New returns an empty disk. now stamps modification times (nil:
// time.Now, which is the bubble's virtual clock inside synctest).
func New(now func() time.Time) *FS {
	if now == nil {
		now = time.Now
	}
	return &FS{now: now, files: map[string]*inode{}, dirs: map[string]bool{}, crashed: make(chan struct{})}
}

// ErrCrashed is returned by a file handle opened before a crash, and by
// an operation a crash woke from a stall: the process it belonged to is
// gone.
var ErrCrashed = errors.New("simdisk: the disk crashed since this file was opened")

// Crash drops every write not made durable by a Sync: each file goes back
// to its content as of its last Sync (empty if it never had one). Files
// open before the crash are dead (ErrCrashed), and operations stalled
// are woken with ErrCrashed. The directory tree stays as it is.
func (d *FS) Crash() { d.crash(nil) }

// CrashTorn is Crash except that, per file with pending writes, a random
// number of them (chosen by rng, in order) reach the disk, the last of
// those cut to a random prefix: the torn tail of a write the power
// interrupted. With rng nil it is Crash.
func (d *FS) CrashTorn(rng *rand.Rand) { d.crash(rng) }

func (d *FS) crash(rng *rand.Rand) {
	d.mu.Lock()
	defer d.mu.Unlock()
	paths := make([]string, 0, len(d.files))
	for p := range d.files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // rng draws in a fixed order
	for _, p := range paths {
		f := d.files[p]
		data := append([]byte(nil), f.durable...)
		if rng != nil && len(f.pending) > 0 {
			k := rng.Intn(len(f.pending)) // whole ops kept before the torn one
			for _, o := range f.pending[:k] {
				data = apply(data, o)
			}
			o := f.pending[k]
			if !o.trunc && len(o.data) > 0 {
				o.data = o.data[:rng.Intn(len(o.data)+1)]
				data = apply(data, o)
			}
		}
		f.data = data
		f.durable = append([]byte(nil), data...)
		f.pending = nil
	}
	d.gen++
	close(d.crashed)
	d.crashed = make(chan struct{})
	d.stall, d.stallCtx = nil, nil
}

// apply performs o on data, growing it with zeros where a write lands
// past the end.
func apply(data []byte, o op) []byte {
	if o.trunc {
		if o.off <= int64(len(data)) {
			return data[:o.off]
		}
		return append(data, make([]byte, o.off-int64(len(data)))...)
	}
	end := o.off + int64(len(o.data))
	if end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[o.off:], o.data)
	return data
}

// FailNextSync arms a one-shot failure: the next fsync (File.Sync or
// SyncDir) of a path starting with prefix returns err (nil: EIO), and
// makes nothing durable.
func (d *FS) FailNextSync(prefix string, err error) {
	if err == nil {
		err = syscall.EIO
	}
	d.mu.Lock()
	d.failSync = append(d.failSync, failure{filepath.Clean(prefix), err})
	d.mu.Unlock()
}

// DisarmSyncFailures drops every fsync failure armed and not yet fired.
func (d *FS) DisarmSyncFailures() {
	d.mu.Lock()
	d.failSync = nil
	d.mu.Unlock()
}

// Stall holds every write, truncation and fsync on the disk from now
// until release is called, ctx ends (the stall ends; the operations it
// held fail with ctx's error) or the disk crashes. Reads go on.
func (d *FS) Stall(ctx context.Context) (release func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	ch := make(chan struct{})
	d.mu.Lock()
	d.stall, d.stallCtx = ch, ctx
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			if d.stall == ch {
				d.stall, d.stallCtx = nil, nil
			}
			d.mu.Unlock()
			close(ch)
		})
	}
}

// waitStallLocked blocks, without d.mu, while the disk is stalled. It
// returns with d.mu held.
func (d *FS) waitStallLocked(gen uint64) error {
	for d.stall != nil {
		ch, ctx, crashed := d.stall, d.stallCtx, d.crashed
		d.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
			d.mu.Lock()
			if d.stall == ch {
				d.stall, d.stallCtx = nil, nil
			}
			d.mu.Unlock()
		case <-crashed:
			err = ErrCrashed
		}
		d.mu.Lock()
		if err == nil && d.gen != gen {
			err = ErrCrashed
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// syncFailLocked pops the failure armed for path, if any.
func (d *FS) syncFailLocked(path string) error {
	for i, f := range d.failSync {
		if path == f.prefix || strings.HasPrefix(path, f.prefix) {
			d.failSync = append(d.failSync[:i], d.failSync[i+1:]...)
			return f.err
		}
	}
	return nil
}

// Durable returns the content of name as a crash now would leave it
// (CrashTorn aside), for tests.
func (d *FS) Durable(name string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[filepath.Clean(name)]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), f.durable...), true
}

func perr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

func parent(p string) string { return filepath.Dir(p) }

// dirExistsLocked: the root and "." always exist.
func (d *FS) dirExistsLocked(p string) bool {
	return d.dirs[p] || p == "/" || p == "." || parent(p) == p
}

// OpenFile implements storage.FS.
func (d *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	p := filepath.Clean(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs[p] {
		return nil, perr("open", name, syscall.EISDIR)
	}
	f, ok := d.files[p]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, perr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, perr("open", name, fs.ErrNotExist)
	case !ok:
		if !d.dirExistsLocked(parent(p)) {
			return nil, perr("open", name, fs.ErrNotExist)
		}
		f = &inode{mtime: d.now()}
		d.files[p] = f
	}
	h := &file{d: d, ino: f, name: name, gen: d.gen, flag: flag}
	if flag&os.O_TRUNC != 0 && h.writable() {
		if err := d.waitStallLocked(h.gen); err != nil {
			return nil, perr("open", name, err)
		}
		d.truncLocked(f, 0)
	}
	return h, nil
}

func (d *FS) truncLocked(f *inode, size int64) {
	o := op{off: size, trunc: true}
	f.data = apply(f.data, o)
	f.pending = append(f.pending, o)
	f.mtime = d.now()
}

// ReadFile implements storage.FS.
func (d *FS) ReadFile(name string) ([]byte, error) {
	p := filepath.Clean(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs[p] {
		return nil, perr("read", name, syscall.EISDIR)
	}
	f, ok := d.files[p]
	if !ok {
		return nil, perr("open", name, fs.ErrNotExist)
	}
	return append([]byte(nil), f.data...), nil
}

// Remove implements storage.FS: a file, or an empty directory.
func (d *FS) Remove(name string) error {
	p := filepath.Clean(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.files[p]; ok {
		delete(d.files, p)
		return nil
	}
	if !d.dirs[p] {
		return perr("remove", name, fs.ErrNotExist)
	}
	if d.hasChildrenLocked(p) {
		return perr("remove", name, syscall.ENOTEMPTY)
	}
	delete(d.dirs, p)
	return nil
}

func under(p, dir string) bool { return strings.HasPrefix(p, dir+string(filepath.Separator)) }

func (d *FS) hasChildrenLocked(dir string) bool {
	for p := range d.files {
		if under(p, dir) {
			return true
		}
	}
	for p := range d.dirs {
		if under(p, dir) {
			return true
		}
	}
	return false
}

// RemoveAll implements storage.FS.
func (d *FS) RemoveAll(path string) error {
	p := filepath.Clean(path)
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.files, p)
	delete(d.dirs, p)
	for q := range d.files {
		if under(q, p) {
			delete(d.files, q)
		}
	}
	for q := range d.dirs {
		if under(q, p) {
			delete(d.dirs, q)
		}
	}
	return nil
}

// Rename implements storage.FS: a file (replacing a file at newpath) or a
// directory with everything under it (onto a missing or empty one).
func (d *FS) Rename(oldpath, newpath string) error {
	o, n := filepath.Clean(oldpath), filepath.Clean(newpath)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dirExistsLocked(parent(n)) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if f, ok := d.files[o]; ok {
		if d.dirs[n] {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
		if o != n {
			d.files[n] = f
			delete(d.files, o)
		}
		return nil
	}
	if !d.dirs[o] {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if o == n {
		return nil
	}
	if _, ok := d.files[n]; ok || d.dirs[n] && d.hasChildrenLocked(n) || under(n, o) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EEXIST}
	}
	move := func(q string) string { return n + q[len(o):] }
	for q, f := range d.files {
		if under(q, o) {
			delete(d.files, q)
			d.files[move(q)] = f
		}
	}
	for q := range d.dirs {
		if under(q, o) {
			delete(d.dirs, q)
			d.dirs[move(q)] = true
		}
	}
	delete(d.dirs, o)
	d.dirs[n] = true
	return nil
}

// MkdirAll implements storage.FS.
func (d *FS) MkdirAll(path string, perm fs.FileMode) error {
	p := filepath.Clean(path)
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := p; !d.dirExistsLocked(q); q = parent(q) {
		if _, ok := d.files[q]; ok {
			return perr("mkdir", q, syscall.ENOTDIR)
		}
		d.dirs[q] = true
	}
	return nil
}

// ReadDir implements storage.FS.
func (d *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	p := filepath.Clean(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dirExistsLocked(p) {
		return nil, perr("open", name, fs.ErrNotExist)
	}
	var out []fs.DirEntry
	for q, f := range d.files {
		if parent(q) == p && q != p {
			out = append(out, fs.FileInfoToDirEntry(info{name: filepath.Base(q), size: int64(len(f.data)), mtime: f.mtime}))
		}
	}
	for q := range d.dirs {
		if parent(q) == p && q != p {
			out = append(out, fs.FileInfoToDirEntry(info{name: filepath.Base(q), dir: true}))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements storage.FS.
func (d *FS) Stat(name string) (fs.FileInfo, error) {
	p := filepath.Clean(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.files[p]; ok {
		return info{name: filepath.Base(p), size: int64(len(f.data)), mtime: f.mtime}, nil
	}
	if d.dirExistsLocked(p) {
		return info{name: filepath.Base(p), dir: true}, nil
	}
	return nil, perr("stat", name, fs.ErrNotExist)
}

// SyncDir implements storage.FS. Directory entries are durable at once
// (see the package comment), so it only checks, stalls and fails.
func (d *FS) SyncDir(dir string) error {
	p := filepath.Clean(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dirExistsLocked(p) {
		return perr("open", dir, fs.ErrNotExist)
	}
	if err := d.waitStallLocked(d.gen); err != nil {
		return perr("sync", dir, err)
	}
	if err := d.syncFailLocked(p); err != nil {
		return perr("sync", dir, err)
	}
	return nil
}

// info is an fs.FileInfo.
type info struct {
	name  string
	size  int64
	mtime time.Time
	dir   bool
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.size }
func (i info) ModTime() time.Time { return i.mtime }
func (i info) IsDir() bool        { return i.dir }
func (i info) Sys() any           { return nil }
func (i info) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// file is an open file: a handle on an inode (which a rename or removal
// does not disturb, as on POSIX).
type file struct {
	d      *FS
	ino    *inode
	name   string
	gen    uint64
	flag   int
	off    int64
	closed bool
}

func (h *file) writable() bool { return h.flag&(os.O_WRONLY|os.O_RDWR) != 0 }
func (h *file) readable() bool { return h.flag&os.O_WRONLY == 0 }

// checkLocked: the handle is open and from this life of the disk.
func (h *file) checkLocked(op string) error {
	if h.closed {
		return perr(op, h.name, fs.ErrClosed)
	}
	if h.gen != h.d.gen {
		return perr(op, h.name, ErrCrashed)
	}
	return nil
}

func (h *file) Name() string { return h.name }

func (h *file) Close() error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.closed {
		return perr("close", h.name, fs.ErrClosed)
	}
	h.closed = true
	return nil
}

func (h *file) Stat() (fs.FileInfo, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("stat"); err != nil {
		return nil, err
	}
	return info{name: filepath.Base(h.name), size: int64(len(h.ino.data)), mtime: h.ino.mtime}, nil
}

func (h *file) readAtLocked(b []byte, off int64) (int, error) {
	if !h.readable() {
		return 0, perr("read", h.name, syscall.EBADF)
	}
	if off >= int64(len(h.ino.data)) {
		return 0, io.EOF
	}
	n := copy(b, h.ino.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (h *file) ReadAt(b []byte, off int64) (int, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, perr("readat", h.name, syscall.EINVAL)
	}
	return h.readAtLocked(b, off)
}

func (h *file) Read(b []byte) (int, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("read"); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, err := h.readAtLocked(b, h.off)
	h.off += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

func (h *file) writeAtLocked(b []byte, off int64) (int, error) {
	if !h.writable() {
		return 0, perr("write", h.name, syscall.EBADF)
	}
	if err := h.d.waitStallLocked(h.gen); err != nil {
		return 0, perr("write", h.name, err)
	}
	if err := h.checkLocked("write"); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	o := op{off: off, data: append([]byte(nil), b...)}
	h.ino.data = apply(h.ino.data, o)
	h.ino.pending = append(h.ino.pending, o)
	h.ino.mtime = h.d.now()
	return len(b), nil
}

func (h *file) WriteAt(b []byte, off int64) (int, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, perr("writeat", h.name, syscall.EINVAL)
	}
	if h.flag&os.O_APPEND != 0 {
		return 0, errors.New("simdisk: WriteAt on a file opened with O_APPEND")
	}
	return h.writeAtLocked(b, off)
}

func (h *file) Write(b []byte) (int, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("write"); err != nil {
		return 0, err
	}
	off := h.off
	if h.flag&os.O_APPEND != 0 {
		off = int64(len(h.ino.data))
	}
	n, err := h.writeAtLocked(b, off)
	h.off = off + int64(n)
	return n, err
}

func (h *file) Seek(offset int64, whence int) (int64, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("seek"); err != nil {
		return 0, err
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.off
	case io.SeekEnd:
		base = int64(len(h.ino.data))
	default:
		return 0, perr("seek", h.name, syscall.EINVAL)
	}
	if base+offset < 0 {
		return 0, perr("seek", h.name, syscall.EINVAL)
	}
	h.off = base + offset
	return h.off, nil
}

func (h *file) Truncate(size int64) error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("truncate"); err != nil {
		return err
	}
	if size < 0 || !h.writable() {
		return perr("truncate", h.name, syscall.EINVAL)
	}
	if err := h.d.waitStallLocked(h.gen); err != nil {
		return perr("truncate", h.name, err)
	}
	if err := h.checkLocked("truncate"); err != nil {
		return err
	}
	h.d.truncLocked(h.ino, size)
	return nil
}

// Sync makes the file's current content durable, whichever handle wrote
// it (the page cache is the file's, not the handle's).
func (h *file) Sync() error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err := h.checkLocked("sync"); err != nil {
		return err
	}
	if err := h.d.waitStallLocked(h.gen); err != nil {
		return perr("sync", h.name, err)
	}
	if err := h.checkLocked("sync"); err != nil {
		return err
	}
	if err := h.d.syncFailLocked(filepath.Clean(h.name)); err != nil {
		return perr("sync", h.name, err)
	}
	h.ino.durable = append(h.ino.durable[:0], h.ino.data...)
	h.ino.pending = nil
	return nil
}
