package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
)

// defaultMemberRetry is how often a failed Join or Heartbeat is tried again
// before the State has told the engine its lease period.
const defaultMemberRetry = time.Second

// member is the engine's membership of a shared State (see
// state.Membership): the lease that lets it deliver, kept by
// keepMembership while Run runs. For a State without state.Membership,
// the engine is always entitled.
type member struct {
	m state.Membership // nil: the State is not shared

	mu      sync.Mutex
	until   time.Time // the lease's end on this process's clock (monotonic)
	problem string    // why the lease is not proven, for Health

	// joins counts the joins (a lease lost and joined again is a new
	// incarnation, whose share of the names is new to it).
	joins atomic.Uint64
}

// entitled reports whether the engine may deliver now: its State is not
// shared, or its membership lease has not run out.
func (m *member) entitled() bool {
	if m.m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Now().Before(m.until)
}

// Problem says why the engine cannot prove its membership, or "".
func (m *member) Problem() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return m.problem // set only when a State refused an engine that cannot join it
	}
	if m.problem == "" && !time.Now().Before(m.until) {
		return "the engine's membership of the shared state is not (yet) established: it delivers nothing"
	}
	return m.problem
}

func (m *member) set(until time.Time, problem string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.until, m.problem = until, problem
}

// keepMembership joins the shared State and heartbeats every third of the
// lease period until ctx ends, then leaves so the others take over at
// once. A heartbeat that fails leaves the lease to run out on its own
// (nothing is sent after MemberLease.Until); ErrLeaseLost voids it at once
// and joins again, as a new incarnation whose earlier claims are void.
func (e *Engine) keepMembership(ctx context.Context) {
	m := e.member.m
	defer func() {
		e.member.set(time.Time{}, "the engine stopped")
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.Leave(lctx, e.cfg.Member); err != nil {
			e.log.Warn("could not leave the shared state; the membership runs out by itself", slog.String("err", err.Error()))
		}
	}()
	joined := false
	retry := defaultMemberRetry
	for {
		var lease state.MemberLease
		var err error
		if joined {
			lease, err = m.Heartbeat(ctx, e.cfg.Member)
		} else {
			lease, err = m.Join(ctx, e.cfg.Member)
		}
		if ctx.Err() != nil {
			return
		}
		wait := retry
		switch {
		case err == nil:
			if !joined {
				e.member.joins.Add(1)
				e.log.Info("joined the shared state", slog.String("member", e.cfg.Member), slog.Uint64("incarnation", lease.Incarnation), slog.Duration("period", lease.Period))
				e.inst.member(eventJoined)
				e.notify()
			}
			joined = true
			e.member.set(lease.Until, "")
			if lease.Period > 0 {
				wait, retry = lease.Period/3, max(lease.Period/6, time.Millisecond)
			}
		case errors.Is(err, state.ErrLeaseLost):
			e.log.Error("membership of the shared state lost: delivering nothing until joined again", slog.String("member", e.cfg.Member), slog.String("err", err.Error()))
			e.member.set(time.Time{}, "membership of the shared state lost: "+err.Error())
			e.inst.member(eventLeaseLost)
			joined, wait = false, 0
		default:
			e.log.Error("could not renew the membership of the shared state; delivering stops when the lease runs out", slog.String("member", e.cfg.Member), slog.String("err", err.Error()))
			e.inst.member(eventRenewFailed)
			e.member.mu.Lock()
			e.member.problem = "could not renew the membership of the shared state: " + err.Error()
			e.member.mu.Unlock()
		}
		if !ctxtime.Sleep(ctx, wait) {
			return
		}
	}
}
