package demo

import (
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// Sequencer hands out envelope sequence numbers, one series per agreement
// and message type. Numbers come from the clock (Unix microseconds, as the outbox does) and
// always increase, so a sender that restarts without saved state still
// seals above what its peer's replay guard last accepted. Safe for
// concurrent use.
type Sequencer struct {
	mu   sync.Mutex
	last map[sequenceKey]uint64
	now  func() time.Time
}

type sequenceKey struct {
	agreementID string
	typ         agreement.MessageType
}

// NewSequencer returns a Sequencer on the system clock.
func NewSequencer() *Sequencer {
	return &Sequencer{last: map[sequenceKey]uint64{}, now: time.Now}
}

// Next returns the next sequence number for the agreement's messages of
// type typ: above every number returned before for them.
func (s *Sequencer) Next(agreementID string, typ agreement.MessageType) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sequenceKey{agreementID, typ}
	n := max(s.last[k]+1, uint64(max(s.now().UnixMicro(), 1)))
	s.last[k] = n
	return n
}

// Forget drops the agreement's series, once it has ended.
func (s *Sequencer) Forget(agreementID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.last {
		if k.agreementID == agreementID {
			delete(s.last, k)
		}
	}
}
