package kvtransfer

// tryInline writes control message msg now, on the caller's goroutine, when that cannot
// block and cannot reorder the link's bytes: no page frames pending, nothing queued for
// the writer goroutine, the write lock free, and the socket taking bytes without waiting
// (one non-blocking write(2); writeNow). The writer goroutine then need not be woken, a
// hop that with one P per process waited until the caller's goroutine parked (the engine
// loop's REGISTER, the reader's REGISTER_ACK and ACK). false: queue msg as before. A
// partial write queues its rest first, ahead of anything enqueued meanwhile.
func (l *link) tryInline(msg []byte) bool {
	if !l.wmu.TryLock() {
		return false // a writer holds the link: queue behind it
	}
	defer l.wmu.Unlock()
	if len(l.batches) > 0 || l.err() != nil {
		return false
	}
	l.qmu.Lock()
	queued := len(l.q) > 0
	l.qmu.Unlock()
	if queued {
		return false
	}
	n, ok := writeNow(l.c, msg)
	if !ok {
		return false // the writer goroutine writes it (and meets any error, as before)
	}
	if n == len(msg) {
		return true
	}
	l.qmu.Lock()
	l.q = append([][]byte{msg[n:]}, l.q...)
	l.qmu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return true
}
