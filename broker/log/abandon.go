package log

// Abandon closes the files without flushing, snapshotting or moving the
// recovery point, as a crash would leave them (what was written stays in
// the page cache). Tests use it to simulate kill -9.
func (l *Log) Abandon() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.closeFiles()
}
