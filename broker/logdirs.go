package broker

import (
	"path/filepath"
	"syscall"
)

// LogDir is the broker's log directory as DescribeLogDirs reports it.
type LogDir struct {
	// Path is the directory's absolute path.
	Path string
	// TotalBytes and UsableBytes are its file system's size and the
	// bytes free to this process there; -1 when they cannot be read.
	TotalBytes, UsableBytes int64
	// Err is why the directory cannot be described, or nil.
	Err error
}

// LogDirs lists the broker's log directories: Strand keeps every
// partition in one, DataDir (Kafka's log.dirs with one entry).
func (m *Manager) LogDirs() []LogDir {
	path, err := filepath.Abs(m.cfg.DataDir)
	if err != nil {
		path = m.cfg.DataDir
	}
	d := LogDir{Path: path, TotalBytes: -1, UsableBytes: -1}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		d.Err = err
		return []LogDir{d}
	}
	bs := int64(st.Bsize)
	d.TotalBytes, d.UsableBytes = int64(st.Blocks)*bs, int64(st.Bavail)*bs
	return []LogDir{d}
}
