package agreement_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// storeKinds are the two ways a content tag is made: store versions, and
// checksums of the data for stores without versions (Vault KV v1), whose
// Stat and Get report no Version, so the watcher and the agbot fall back
// to checksums.
var storeKinds = []struct {
	name string
	view func(*secretstore.Store) *secretstore.Store
}{
	{"versions", func(m *secretstore.Store) *secretstore.Store { return m }},
	{"checksums", func(m *secretstore.Store) *secretstore.Store {
		s := mock.NewStore(m)
		s.SetVersionless(true)
		return s.Store
	}},
}

// eachStoreKind runs test once per store kind, with a fresh env.
func eachStoreKind(t *testing.T, test func(t *testing.T, e *trackerEnv)) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.New()
			test(t, newTrackerEnvOver(t, 0, mem, kind.view(mem)))
		})
	}
}

// registerSent registers an agreement of one service with one secret,
// sent the content tagged sentTag.
func (e *trackerEnv) registerSent(id, url, secret, vault string, sentTag secretstore.ContentTag) {
	e.t.Helper()
	sb := sent(url, map[string]string{secret: vault}, map[string]secretstore.ContentTag{vault: sentTag})
	require.NoError(e.t, e.tracker.Register(id, []agreement.ServiceBinding{sb}))
}

// read is the agbot reading a secret for a proposal, through the coalescing
// reader: it returns the tag of the content it would seal.
func (e *trackerEnv) read(name string) secretstore.ContentTag {
	e.t.Helper()
	s, err := e.reader.Get(context.Background(), name)
	require.NoError(e.t, err)
	return s.ContentTag()
}

// sent returns bindings of service url (service secret → store secret)
// with the Sent tags of tags (store secret → tag).
func sent(url string, secrets map[string]string, tags map[string]secretstore.ContentTag) agreement.ServiceBinding {
	sb := svc(url, secrets)
	for name, b := range sb.Secrets {
		b.Sent = tags[b.VaultSecret]
		sb.Secrets[name] = b
	}
	return sb
}

type updates = map[string]map[string]map[string]string

// TestTrackerSentRotationBeforeFirstObservation: the secret rotates after
// the agbot read it for the proposal and before the watcher first looks at
// it. The agreement registered with the tag it was sent gets the new value
// exactly once; one registered without keeps today's behaviour (nothing
// until the next change).
func TestTrackerSentRotationBeforeFirstObservation(t *testing.T) {
	eachStoreKind(t, func(t *testing.T, e *trackerEnv) {
		e.put("s1", "v1")
		e.put("s2", "v1")
		tags := map[string]secretstore.ContentTag{"s1": e.read("s1"), "s2": e.read("s2")}
		e.put("s1", "v2") // rotated before the watcher's first look
		require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{sent("web", map[string]string{"db": "s1", "api": "s2"}, tags)}))
		require.NoError(t, e.tracker.Register("legacy", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))

		ev := e.cycle()
		require.Len(t, ev, 2)
		assert.True(t, ev[0].Initial, "the watcher only sets its baseline")
		assert.Equal(t, updates{"a1": {"web": {"db": "v2"}}}, e.queue.take(t),
			"a1 gets the rotation, carrying only s1")
		e.cycle()
		e.cycle()
		assert.Empty(t, e.queue.take(t), "exactly once")

		e.put("s1", "v3")
		e.cycle()
		assert.Equal(t, updates{"a1": {"web": {"db": "v3"}}, "legacy": {"web": {"db": "v3"}}}, e.queue.take(t),
			"later rotations reach both")
	})
}

// TestTrackerSentAgbotRestart: the agbot persists what each agreement was
// sent (Bindings, encoded), stops, the secret rotates while it is down, and
// a new tracker and watcher over the same store re-register the agreements.
func TestTrackerSentAgbotRestart(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.New()
			before := newTrackerEnvOver(t, 0, mem, kind.view(mem))
			before.put("s1", "v1")
			before.put("s2", "v1")
			require.NoError(t, before.tracker.Register("a1", []agreement.ServiceBinding{sent("web", map[string]string{"db": "s1"}, map[string]secretstore.ContentTag{"s1": before.read("s1")})}))
			require.NoError(t, before.tracker.Register("a2", []agreement.ServiceBinding{sent("web", map[string]string{"db": "s2"}, map[string]secretstore.ContentTag{"s2": before.read("s2")})}))
			before.cycle()
			before.put("s1", "v2")
			before.cycle()
			require.Equal(t, updates{"a1": {"web": {"db": "v2"}}}, before.queue.take(t))

			// The agbot's database: each binding with its encoded tag.
			type row struct{ agreement, service, secret, vault, sent string }
			var db []row
			for _, id := range []string{"a1", "a2"} {
				bindings, ok := before.tracker.Bindings(id)
				require.True(t, ok)
				for _, sb := range bindings {
					for name, b := range sb.Secrets {
						db = append(db, row{id, sb.Service.URL, name, b.VaultSecret, b.Sent.Encode()})
					}
				}
			}
			v2, ok := before.watcher.Observed("s1")
			require.True(t, ok)
			assert.Contains(t, db, row{"a1", "web", "db", "s1", v2.Encode()}, "Bindings gives what a1 was sent last")
			_, ok = before.tracker.Bindings("never-registered")
			assert.False(t, ok)
			before.tracker.Close()

			before.put("s1", "v3") // while the agbot is down

			after := newTrackerEnvOver(t, 0, mem, kind.view(mem))
			for _, r := range db {
				tag, err := secretstore.ParseContentTag(r.sent)
				require.NoError(t, err)
				assert.False(t, tag.IsZero())
				b := agreement.BoundSecret{VaultSecret: r.vault, Sent: tag}
				require.NoError(t, after.tracker.Register(r.agreement, []agreement.ServiceBinding{{
					Service: agreement.ServiceRef{Org: "org", URL: r.service},
					Secrets: map[string]agreement.BoundSecret{r.secret: b},
				}}))
			}
			after.cycle()
			assert.Equal(t, updates{"a1": {"web": {"db": "v3"}}}, after.queue.take(t),
				"the rotation missed while down, to a1 only: a2 and a1's v2 are current")
			after.cycle()
			assert.Empty(t, after.queue.take(t), "exactly once")
		})
	}
}

// TestTrackerSentBehindWatchedBaseline: the secret is already watched for
// another agreement when one whose proposal was built from an older
// version registers; it gets an update, the other agreement nothing.
func TestTrackerSentBehindWatchedBaseline(t *testing.T) {
	eachStoreKind(t, func(t *testing.T, e *trackerEnv) {
		e.put("s1", "v1")
		old := e.read("s1") // a2's proposal
		e.put("s1", "v2")
		e.reader.Invalidate("s1")
		e.registerSent("a1", "web", "db", "s1", e.read("s1"))
		e.cycle()
		require.Empty(t, e.queue.take(t), "a1 has the watcher's baseline")

		e.registerSent("a2", "worker", "q", "s1", old)
		e.cycle()
		assert.Equal(t, updates{"a2": {"worker": {"q": "v2"}}}, e.queue.take(t))
		e.cycle()
		assert.Empty(t, e.queue.take(t), "exactly once")
	})
}

// TestTrackerSentNoDuplicates: agreements whose agents already hold the
// store's content get nothing, while others bound to the same secret are
// updated.
func TestTrackerSentNoDuplicates(t *testing.T) {
	eachStoreKind(t, func(t *testing.T, e *trackerEnv) {
		e.put("s1", "v1")
		v1 := e.read("s1")
		e.registerSent("a1", "web", "db", "s1", v1)
		e.cycle()
		e.registerSent("same", "web", "db", "s1", v1)
		e.cycle()
		assert.Empty(t, e.queue.take(t), "sent what the store holds: nothing to do")

		// a2 is proposed with v2 before the watcher sees the change.
		e.put("s1", "v2")
		e.reader.Invalidate("s1")
		e.registerSent("a2", "web", "db", "s1", e.read("s1"))
		e.cycle()
		assert.Equal(t, updates{"a1": {"web": {"db": "v2"}}, "same": {"web": {"db": "v2"}}}, e.queue.take(t),
			"a2 was sent v2 already")
		e.cycle()
		assert.Empty(t, e.queue.take(t))

		// A queue that fails for one agreement is retried for it alone.
		e.put("s1", "v3")
		e.queue.failFor = map[string]bool{"a2": true}
		e.cycle()
		assert.Equal(t, updates{"a1": {"web": {"db": "v3"}}, "same": {"web": {"db": "v3"}}}, e.queue.take(t))
		e.queue.failFor = nil
		e.cycle()
		assert.Equal(t, updates{"a2": {"web": {"db": "v3"}}}, e.queue.take(t))
		e.cycle()
		assert.Empty(t, e.queue.take(t))
	})
}

// TestTrackerSentMixed: bindings of one secret sealed from different reads
// are all brought up to date at the first observation.
func TestTrackerSentMixed(t *testing.T) {
	e := newTrackerEnv(t, 0)
	e.put("s1", "v1")
	v1 := e.read("s1")
	e.put("s1", "v2")
	e.reader.Invalidate("s1")
	v2 := e.read("s1")
	web := sent("web", map[string]string{"db": "s1"}, map[string]secretstore.ContentTag{"s1": v1})
	worker := sent("worker", map[string]string{"q": "s1"}, map[string]secretstore.ContentTag{"s1": v2})
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{web, worker}))
	e.cycle()
	assert.Equal(t, updates{"a1": {"web": {"db": "v2"}, "worker": {"q": "v2"}}}, e.queue.take(t))
	e.cycle()
	assert.Empty(t, e.queue.take(t))
	bindings, ok := e.tracker.Bindings("a1")
	require.True(t, ok)
	for _, sb := range bindings {
		assert.Equal(t, v2, sb.Secrets[map[string]string{"web": "db", "worker": "q"}[sb.Service.URL]].Sent)
	}
}

// TestTrackerSentLogsNoChecksum: the tracker names secrets in its logs,
// never the checksum tags of a store without versions.
func TestTrackerSentLogsNoChecksum(t *testing.T) {
	mem := memory.New()
	e := newTrackerEnvOver(t, 0, mem, storeKinds[1].view(mem))
	e.put("s1", "v1")
	v1 := e.read("s1")
	e.put("s1", "v2")
	e.registerSent("a1", "web", "db", "s1", v1)
	ev := e.cycle()
	require.Equal(t, updates{"a1": {"web": {"db": "v2"}}}, e.queue.take(t))
	v2, ok := e.watcher.Observed("s1")
	require.True(t, ok)
	e.registerSent("a2", "web", "db", "s1", v1)
	ev = append(ev, e.cycle()...)

	logs := e.logs.String()
	assert.Contains(t, logs, "s1")
	for _, tag := range []secretstore.ContentTag{v1, v2} {
		digits := tag.Encode()[len("sha256:"):]
		assert.NotContains(t, logs, digits[:16])
		for _, event := range ev {
			assert.NotContains(t, event.Version+event.Name, digits[:16], "events carry no checksum")
		}
	}
}
