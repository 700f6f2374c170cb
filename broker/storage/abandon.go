package storage

// Abandon closes the files without flushing, snapshotting or moving the
// recovery point, as a crash would leave them (what was written stays in
// the page cache). Tests use it to simulate kill -9.
func (l *Log) Abandon() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		l.closeFiles()
		l.signalFlushedLocked(nil)
	}
	l.mu.Unlock()
	l.bg.Wait()
}
