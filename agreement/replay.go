package agreement

import (
	"context"
	"fmt"
	"sync"
)

// ReplayGuard keeps, per agreement and message type, the last sequence a
// recipient accepted. Open calls it last, after the envelope verified and
// decrypted, so only authentic envelopes advance it. Implementations must be
// safe for concurrent use; an agent that must resist replays across
// restarts persists the state (MemoryReplayGuard does not).
type ReplayGuard interface {
	// Accept atomically checks that seq is above the last sequence accepted
	// for (agreementID, typ) and records it. When it is not, Accept returns
	// an error wrapping ErrReplay and records nothing. Any other error (a
	// failed write) is returned as is and means the message must not be
	// applied.
	Accept(ctx context.Context, agreementID string, typ MessageType, seq uint64) error
}

// MemoryReplayGuard is a ReplayGuard kept in memory. The zero value is
// ready to use.
type MemoryReplayGuard struct {
	mu   sync.Mutex
	last map[replayKey]uint64
}

type replayKey struct {
	agreementID string
	typ         MessageType
}

// NewMemoryReplayGuard returns an empty MemoryReplayGuard.
func NewMemoryReplayGuard() *MemoryReplayGuard { return &MemoryReplayGuard{} }

// Accept implements ReplayGuard.
func (g *MemoryReplayGuard) Accept(ctx context.Context, agreementID string, typ MessageType, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := replayKey{agreementID, typ}
	if last := g.last[k]; seq <= last {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is not above %d", ErrReplay, typ, seq, agreementID, last)
	}
	if g.last == nil {
		g.last = make(map[replayKey]uint64)
	}
	g.last[k] = seq
	return nil
}

// Last returns the last sequence accepted for (agreementID, typ), 0 if none.
func (g *MemoryReplayGuard) Last(agreementID string, typ MessageType) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last[replayKey{agreementID, typ}]
}

// Forget drops the state of an agreement, for when it ends. Its envelopes
// would be accepted again afterwards, so call it only once the agreement
// can no longer be acted on.
func (g *MemoryReplayGuard) Forget(agreementID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.last {
		if k.agreementID == agreementID {
			delete(g.last, k)
		}
	}
}
