package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// A checksum tag can test guesses of a value: state inspect shows whether
// a tag is known, never the tag, in either format.
func TestInspectionShowsNoTag(t *testing.T) {
	const sum = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	tag, err := secretstore.ParseContentTag("sha256:" + sum)
	require.NoError(t, err)
	rec := state.Record{ID: "agreement-1", Node: "node-1", Phase: state.PhaseActive, Epoch: 2, Counter: 3,
		Slots: []state.Slot{{Name: "api_key", Desired: state.Content{StoreName: "myorg/web/api-key", Tag: tag}}}}
	in := inspection{State: "state file x", Agreements: []recordView{viewRecord(rec)}, Waits: []waitView{}}
	for _, tc := range []struct {
		format string
		detail bool
	}{{"table", false}, {"table", true}, {"json", false}, {"json", true}} {
		var b bytes.Buffer
		require.NoError(t, writeInspection(&b, tc.format, in, tc.detail))
		out := b.String()
		assert.NotContains(t, out, sum[:16], "%s detail=%v", tc.format, tc.detail)
		assert.NotContains(t, out, "sha256", "%s detail=%v", tc.format, tc.detail)
		if tc.detail {
			assert.Contains(t, out, "present")
			assert.Contains(t, out, "absent")
		}
	}
	v := viewRecord(rec)
	assert.Equal(t, contentView{StoreName: "myorg/web/api-key", Tag: "present"}, v.Slots[0].Desired)
	assert.Equal(t, contentView{Tag: "absent"}, v.Slots[0].Acked)
	assert.False(t, v.InSync, "nothing acknowledged")
	assert.True(t, strings.HasPrefix(v.Phase, "active"))
}
