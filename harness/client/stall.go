package client

import "time"

// The stall deadline without a timer reset per chunk: a chunk stores its arrival
// (progress, an atomic store), and the stall timer, when it fires before the stream was
// silent for the whole bound, re-arms itself for what is left. A held stream that gets a
// token a second used to move its timer in the runtime's timer heap once a second.

// armStall starts the stall deadline d, counted from now; fire runs once the stream has
// been silent for d.
func (s *reqState) armStall(d time.Duration, fire func()) {
	s.stallBase = time.Now()
	// Armed far off, then reset to d once s.stall is set: the callback reads s.stall.
	s.stall = time.AfterFunc(1<<62, func() {
		if left := d - s.silence(); left > 0 && !s.stopped.Load() {
			s.stall.Reset(left)
			if s.stopped.Load() {
				s.stall.Stop() // stop ran between the check and the reset
			}
			return
		}
		fire()
	})
	s.stall.Reset(d)
}

// progress records that the stream made progress now.
func (s *reqState) progress() { s.lastProgress.Store(int64(time.Since(s.stallBase))) }

// silence is how long the stream has been silent.
func (s *reqState) silence() time.Duration {
	return time.Since(s.stallBase) - time.Duration(s.lastProgress.Load())
}
