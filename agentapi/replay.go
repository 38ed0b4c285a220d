package agentapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// The agent's replay state: per agreement, the sequence of the newest
// message accepted from the agbot and of the last reply sent, in
// <root>/agreements.json. Proposal and updates of an agreement share one
// sequence series (the agbot allocates both from one counter), so a delayed
// proposal cannot re-apply older content after a newer update.
//
// The floor an envelope must reach is also written into the metadata of
// every instance a message changed, atomically with its files; Open takes
// the larger of the two. A lost, truncated or corrupt agreements.json can
// therefore never let an old envelope roll an existing instance back. The
// state of an ended agreement is kept (up to maxEndedAgreements, oldest
// dropped first), so its envelopes cannot bring its instances back.

// agreementsFile is the replay state's file under the root.
const agreementsFile = "agreements.json"

// agreementsVersion is the version of its format.
const agreementsVersion = 1

// maxAgreementsBytes bounds agreements.json read at Open.
const maxAgreementsBytes = 8 << 20

// maxEndedAgreements bounds the ended agreements whose state is kept.
const maxEndedAgreements = 4096

// agreementState is what the agent remembers of one agreement.
type agreementState struct {
	// Sequence is the sequence of the newest message accepted.
	Sequence uint64 `json:"sequence"`
	// Reply is the sequence of the last reply sealed.
	Reply uint64 `json:"reply,omitempty"`
	// Ended is when the agreement's instances were removed, if they were.
	Ended time.Time `json:"ended,omitzero"`
}

// agreementsJSON is the form of agreements.json.
type agreementsJSON struct {
	Version int `json:"version"`
	// Since is when this replay state began; zero in files written before
	// it was kept.
	Since      time.Time                 `json:"since,omitzero"`
	Agreements map[string]agreementState `json:"agreements"`
}

// loadAgreements reads the replay state and raises each agreement's floor
// to the newest sequence its instances record. A missing or unreadable
// file is not fatal: the instances' floors stand (and are logged).
func (s *Store) loadAgreements() error {
	state, since, err := s.readAgreements()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(s.instances) > 0 {
			s.log.Warn("the replay state is missing; taking each agreement's floor from its instances", "file", agreementsFile)
		}
	case err != nil:
		s.log.Error("the replay state is unreadable; taking each agreement's floor from its instances", "file", agreementsFile, "err", err)
	}
	if err != nil {
		// A replay state begins now: older envelopes of agreements it has
		// no floor for are replays.
		state, since = map[string]agreementState{}, time.Now()
	}
	s.since = since
	raised := err != nil
	for _, m := range s.instances {
		st := state[m.AgreementID]
		if m.Sequence > st.Sequence {
			st.Sequence, st.Ended = m.Sequence, time.Time{}
			state[m.AgreementID] = st
			raised = true
		}
	}
	s.agreements = state
	if raised {
		return s.saveAgreements(state)
	}
	return nil
}

// readAgreements reads and checks agreements.json.
func (s *Store) readAgreements() (map[string]agreementState, time.Time, error) {
	f, _, err := openRegular(s.meta, agreementsFile, os.O_RDONLY)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() { _ = f.Close() }() // read-only
	b, err := io.ReadAll(io.LimitReader(f, maxAgreementsBytes+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	var v agreementsJSON
	if err := jsonproblem.Decode(bytes.NewReader(b), maxAgreementsBytes, &v); err != nil {
		return nil, time.Time{}, err
	}
	if v.Version != agreementsVersion {
		return nil, time.Time{}, fmt.Errorf("version %d, want %d", v.Version, agreementsVersion)
	}
	if v.Agreements == nil {
		v.Agreements = map[string]agreementState{}
	}
	return v.Agreements, v.Since, nil
}

// saveAgreements persists state atomically, keeping the newest
// maxEndedAgreements ended agreements. s.mu is held (or the store is not
// open yet).
func (s *Store) saveAgreements(state map[string]agreementState) error {
	var ended []string
	for id, st := range state {
		if !st.Ended.IsZero() {
			ended = append(ended, id)
		}
	}
	if len(ended) > maxEndedAgreements {
		slices.SortFunc(ended, func(a, b string) int { return state[a].Ended.Compare(state[b].Ended) })
		state = maps.Clone(state)
		for _, id := range ended[:len(ended)-maxEndedAgreements] {
			delete(state, id)
		}
	}
	b, err := json.Marshal(agreementsJSON{Version: agreementsVersion, Since: s.since, Agreements: state})
	if err == nil {
		err = s.writeFile(s.meta, agreementsFile, b, 0o600, noGroup, noGroup)
	}
	if err == nil {
		err = syncDir(s.meta, ".")
	}
	if err != nil {
		return fmt.Errorf("saving the replay state: %w", err)
	}
	s.view.Lock()
	s.agreements = state
	s.view.Unlock()
	return nil
}

// sealedBeforeStart reports whether an envelope of agreementID sealed at
// sealed is older than the replay state while the state has no floor for
// the agreement: a replay to an agent that lost its replay state.
func (s *Store) sealedBeforeStart(agreementID string, sealed time.Time) bool {
	return s.floor(agreementID) == 0 && sealed.Before(s.since)
}

// floor returns the sequence an envelope of the agreement must reach: the
// newest accepted. An envelope with exactly that sequence is the same
// message again (its reply was lost); applying it again changes nothing.
func (s *Store) floor(agreementID string) uint64 {
	s.view.RLock()
	defer s.view.RUnlock()
	st := s.agreements[agreementID]
	if brokenForgetFloor && !st.Ended.IsZero() {
		return 0
	}
	return st.Sequence
}

// endAgreement records that the agreement's instances are gone. s.mu is
// held.
func (s *Store) endAgreement(agreementID string) error {
	s.view.RLock()
	st, ok := s.agreements[agreementID]
	s.view.RUnlock()
	if !ok || !st.Ended.IsZero() {
		return nil
	}
	st.Ended = time.Now()
	return s.saveAgreements(s.withAgreement(agreementID, st))
}

// withAgreement returns a copy of the state with the agreement's entry set.
func (s *Store) withAgreement(agreementID string, st agreementState) map[string]agreementState {
	s.view.RLock()
	defer s.view.RUnlock()
	state := maps.Clone(s.agreements)
	state[agreementID] = st
	return state
}
