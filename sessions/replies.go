package sessions

import "time"

// replyStall is how long the writer may make no progress, while the
// replies' lane is at MaxReplies, before the client is taken for one that
// does not read: half the write timeout, so that the session is closed
// with 1008 (the close frame behind the write in progress, if the client
// reads again) before that write's own deadline breaks the socket.
func (s *session) replyStall() time.Duration { return s.cfg.WriteTimeout / 2 }

// waitRepliesLocked holds the reader, which is the caller (every reply is
// queued by it), until a reply of cost fits the prio lane: the client's
// next messages are not read meanwhile, so what a session holds stays
// bounded while a client that reads is never closed for sending in a
// burst. It reports false, the reply not to be queued, when the session
// is ending meanwhile, or when the writer made no progress for
// replyStall: the client does not read, and the session is closed with
// 1008 (overflowLocked).
func (s *session) waitRepliesLocked(cost int) bool {
	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		s.replyWait = false
	}()
	for s.prioBytes > 0 && s.prioBytes+cost > s.cfg.MaxReplies {
		if s.stopping || s.broken || s.overflowed || s.aborting != nil {
			return false
		}
		// A write in progress counts from its start; otherwise the writer
		// is about to take frames, and the wait counts from its own start.
		since := s.progressAt
		if !s.inWrite && since.Before(start) {
			since = start
		}
		left := s.replyStall() - time.Since(since)
		if left <= 0 {
			s.overflowLocked()
			return false
		}
		if timer == nil {
			timer = time.AfterFunc(left, s.wakeReplyWait)
		} else {
			timer.Reset(left)
		}
		s.replyWait = true
		s.space.Wait()
	}
	return !s.stopping && !s.broken && !s.overflowed
}

// wakeReplyWait lets a reader waiting for room on the prio lane check the
// time.
func (s *session) wakeReplyWait() {
	s.mu.Lock()
	s.space.Broadcast()
	s.mu.Unlock()
}
