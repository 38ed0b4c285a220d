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
// restarts persists the state (NewMemoryReplayGuard's guard does not).
type ReplayGuard interface {
	// Accept atomically checks that seq is above the last sequence accepted
	// for (agreementID, typ) and records it. When it is not, Accept returns
	// an error wrapping ErrReplay and records nothing. Any other error (a
	// failed write) is returned as is and means the message must not be
	// applied.
	Accept(ctx context.Context, agreementID string, typ MessageType, seq uint64) error
}

// memoryReplayGuard is the ReplayGuard NewMemoryReplayGuard returns.
type memoryReplayGuard struct {
	mu   sync.Mutex
	last map[replayKey]uint64
}

type replayKey struct {
	agreementID string
	typ         MessageType
}

// NewMemoryReplayGuard returns an empty ReplayGuard kept in memory: it
// forgets everything when the process ends.
func NewMemoryReplayGuard() ReplayGuard { return &memoryReplayGuard{last: map[replayKey]uint64{}} }

// Accept implements ReplayGuard.
func (g *memoryReplayGuard) Accept(ctx context.Context, agreementID string, typ MessageType, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := replayKey{agreementID, typ}
	if last := g.last[k]; seq <= last {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is not above %d", ErrReplay, typ, seq, agreementID, last)
	}
	g.last[k] = seq
	return nil
}
