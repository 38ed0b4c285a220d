package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// maxGuardFile bounds the replay state file.
const maxGuardFile = 16 << 20

// fileGuard is an agreement.ReplayGuard whose state survives a restart of
// the agent, in a JSON file (0600) of the last sequence accepted per
// agreement and message type:
//
//	{"<agreement id>": {"proposal": 17..., "update": 17...}}
//
// Without it a relay could, after a restart, replay an old proposal or
// update and roll the instance's secrets back. The file holds ids and
// numbers, nothing secret. The state of an ended agreement is kept, so its
// envelopes stay refused.
type fileGuard struct {
	path string

	mu   sync.Mutex
	last map[string]map[agreement.MessageType]uint64
}

// openFileGuard loads the state at path, or starts empty when there is no
// file yet.
func openFileGuard(path string) (*fileGuard, error) {
	g := &fileGuard{path: path, last: map[string]map[agreement.MessageType]uint64{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, err
	}
	if err := jsonproblem.Decode(bytes.NewReader(b), maxGuardFile, &g.last); err != nil {
		return nil, fmt.Errorf("replay state %s: %w", path, err)
	}
	if g.last == nil {
		g.last = map[string]map[agreement.MessageType]uint64{}
	}
	return g, nil
}

// Accept implements agreement.ReplayGuard. The sequence is recorded only
// once the file is written: a failed write refuses the message.
func (g *fileGuard) Accept(ctx context.Context, agreementID string, typ agreement.MessageType, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.last[agreementID][typ]
	if seq <= last {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is not above %d", agreement.ErrReplay, typ, seq, agreementID, last)
	}
	if g.last[agreementID] == nil {
		g.last[agreementID] = map[agreement.MessageType]uint64{}
	}
	g.last[agreementID][typ] = seq
	b, err := json.Marshal(g.last)
	if err == nil {
		err = demo.WritePrivateFile(g.path, b)
	}
	if err != nil {
		if last == 0 {
			delete(g.last[agreementID], typ)
		} else {
			g.last[agreementID][typ] = last
		}
		return fmt.Errorf("saving the replay state: %w", err)
	}
	return nil
}
