package agreement

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProposalSealOpen(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			agbot, agent := mustKeys(t, suite), mustKeys(t, suite)
			p := proposalWithSecrets("agr-1", 10, 300)
			p.Version = 0 // filled in by SealProposal
			p.Services[0].Secrets["raw"] = SecretDetails{Format: FormatRaw, Data: edgesecrets.Data{"cert": {0, 1, 2, 0xff}}}
			p.Services[0].Secrets["hw_who"] = SecretDetails{Format: FormatValueOnly, Data: edgesecrets.Data{"key": []byte("name"), valueKey: []byte("World")}}

			env, err := Seal(agbot, agent.Public(), p, Header{Sequence: 1, Time: t0}, Options{})
			require.NoError(t, err)
			h, got, err := Open[Proposal](context.Background(), agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
			require.NoError(t, err)

			assert.Equal(t, TypeProposal, h.Type)
			assert.Equal(t, "agr-1", h.AgreementID)
			assert.Equal(t, messageVersion, got.Version)
			assert.Equal(t, p.AgreementID, got.AgreementID)
			require.Len(t, got.Services, 1)
			assert.Equal(t, p.Services[0].Service, got.Services[0].Service)
			assert.Equal(t, p.Services[0].secretNames(), got.Services[0].secretNames())
			for name, want := range p.Services[0].Secrets {
				assert.Equal(t, want.Format, got.Services[0].Secrets[name].Format, name)
				assert.True(t, want.Data.Equal(got.Services[0].Secrets[name].Data), name)
			}
		})
	}
}

func TestSecretDetailsValidate(t *testing.T) {
	one := edgesecrets.Data{"password": []byte("x")}
	oh := edgesecrets.Data{"key": []byte("name"), valueKey: []byte("World")}
	cases := []struct {
		name    string
		details SecretDetails
		wantErr string
	}{
		{"default format", SecretDetails{Data: oh}, ""},
		{"json", SecretDetails{Format: FormatJSON, Data: oh}, ""},
		{"raw with one key", SecretDetails{Format: FormatRaw, Data: one}, ""},
		{"raw with Open Horizon's key and value", SecretDetails{Format: FormatRaw, Data: oh}, ""},
		{"raw with only a value key", SecretDetails{Format: FormatRaw, Data: edgesecrets.Data{valueKey: nil}}, ""},
		{"raw with two other keys", SecretDetails{Format: FormatRaw, Data: edgesecrets.Data{"user": nil, "password": nil}}, `format "raw" needs exactly one key, or Open Horizon's "key" and "value"; has 2 keys`},
		{"raw with key, value and another", SecretDetails{Format: FormatRaw, Data: edgesecrets.Data{"key": nil, valueKey: nil, "x": nil}}, `has 3 keys`},
		{"raw with no key", SecretDetails{Format: FormatRaw, Data: edgesecrets.Data{}}, `has 0 keys`},
		{"value_only with a value key", SecretDetails{Format: FormatValueOnly, Data: oh}, ""},
		{"value_only with only a value key", SecretDetails{Format: FormatValueOnly, Data: edgesecrets.Data{valueKey: nil}}, ""},
		{"value_only without a value key", SecretDetails{Format: FormatValueOnly, Data: one}, `format "value_only" needs a "value" key, has 1 other keys`},
		{"unknown format", SecretDetails{Format: "yaml", Data: one}, `unknown format "yaml"`},
		{"empty key", SecretDetails{Data: edgesecrets.Data{"": nil}}, "empty key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.details.Validate()
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.wantErr)
		})
	}
}

func TestUpdateSealOpen(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteMLKEM768X25519), mustKeys(t, SuiteMLKEM768X25519)
	guard := NewMemoryReplayGuard()
	changed := proposalWithSecrets("agr-1", 1, 20).Services

	u, err := NewSecretsUpdate("agr-1", SecretsUpdate{Services: changed})
	require.NoError(t, err)
	env, err := Seal(agbot, agent.Public(), u, Header{Sequence: 1}, Options{})
	require.NoError(t, err)
	h, got, err := Open[Update](context.Background(), agent, agbot.Public(), env, guard, Options{})
	require.NoError(t, err)
	assert.Equal(t, TypeUpdate, h.Type)
	su, err := got.Secrets()
	require.NoError(t, err)
	require.Len(t, su.Services, 1)
	assert.True(t, changed[0].Secrets["secret-00"].Data.Equal(su.Services[0].Secrets["secret-00"].Data))

	// A kind this package does not know opens: the agent answers it.
	future := Update{AgreementID: "agr-1", Kind: "labels", Payload: json.RawMessage(`{"tier":"gold"}`)}
	env, err = Seal(agbot, agent.Public(), future, Header{Sequence: 2}, Options{})
	require.NoError(t, err)
	_, got, err = Open[Update](context.Background(), agent, agbot.Public(), env, guard, Options{})
	require.NoError(t, err)
	assert.Equal(t, "labels", got.Kind)
	_, err = got.Secrets()
	requireKind(t, err, errUnexpectedType)
}

func TestReplySealOpen(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	answered := Header{Type: TypeUpdate, AgreementID: "agr-1", Sequence: 4}
	for i, r := range []Reply{NewReply(answered, true, ""), NewReply(answered, false, "unknown update kind \"labels\"")} {
		env, err := Seal(agent, agbot.Public(), r, Header{Sequence: uint64(i + 1)}, Options{})
		require.NoError(t, err)
		_, got, err := Open[Reply](context.Background(), agbot, agent.Public(), env, NewMemoryReplayGuard(), Options{})
		require.NoError(t, err)
		assert.Equal(t, r, got)
		assert.Equal(t, MessageRef{Type: TypeUpdate, Sequence: 4}, got.InReplyTo)
	}

	long := NewReply(answered, false, strings.Repeat("é", maxReasonLength))
	assert.LessOrEqual(t, len(long.Reason), maxReasonLength)
	assert.True(t, utf8.ValidString(long.Reason), "cut at a character boundary")
	require.NoError(t, long.validate())

	// A reply without InReplyTo (as older code writes) is valid.
	require.NoError(t, Reply{AgreementID: "a", Accepted: true}.validate())
	// Unknown goes with a rejection only.
	require.NoError(t, Reply{Version: 1, AgreementID: "a", Reason: "no instance", Unknown: true}.validate())
	err := Reply{Version: 1, AgreementID: "a", Accepted: true, Unknown: true}.validate()
	requireKind(t, err, errInvalidMessage)
	assert.Contains(t, err.Error(), "unknown agreement")
}

func TestSealMessageRejects(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	p := proposalWithSecrets("agr-1", 1, 10)
	_, err := Seal(agbot, agent.Public(), Proposal{AgreementID: ""}, Header{Sequence: 1}, Options{})
	requireKind(t, err, errInvalidMessage)
	_, err = Seal(agbot, agent.Public(), p, Header{Sequence: 1, Type: TypeUpdate}, Options{})
	requireKind(t, err, errInvalidMessage)
	_, err = Seal(agbot, agent.Public(), p, Header{Sequence: 1, AgreementID: "agr-2"}, Options{})
	requireKind(t, err, errInvalidMessage)
	_, err = Seal(agbot, agent.Public(), Update{AgreementID: "a", Kind: "secrets", Payload: json.RawMessage(`{}`)}, Header{Sequence: 1}, Options{})
	requireKind(t, err, errInvalidMessage)
	_, err = Seal(agent, agbot.Public(), Reply{AgreementID: "a"}, Header{Sequence: 1}, Options{})
	requireKind(t, err, errInvalidMessage)
	_, err = Seal(agbot, agent.Public(), p, Header{Sequence: 1, Time: t0}, Options{MaxSize: 100})
	requireKind(t, err, errTooLarge)
}

const validProposal = `{"version":1,"agreementId":"agr-1","services":[{"service":{"org":"o","url":"u"},"secrets":{"db":{"format":"json","data":{"password":"czNjcjN0"}}}}]}`

func TestWireFormIsTheJSONForm(t *testing.T) {
	// Messages are encoded by wire.go's encoders and decoded through wire
	// types for speed; the bytes must be those json.Marshal writes through
	// SecretDetails.MarshalJSON (wire_test.go compares them with
	// encoding/json's own encoding of the wire types), and decoding them
	// must give what json.Unmarshal gives.
	p := proposalWithSecrets("agr-1", 3, 10)
	p.Services = append(p.Services, ServiceSecrets{Service: ServiceRef{Org: "o<&>", URL: "u\u2028"}, Secrets: map[string]SecretDetails{
		"é\"x": {Format: FormatRaw, Data: edgesecrets.Data{"k\u0001": {0xff, 0}}},
	}})
	wire, err := p.encode()
	require.NoError(t, err)
	std, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Equal(t, string(std), string(wire))

	var viaStd Proposal
	require.NoError(t, json.Unmarshal(std, &viaStd))
	viaWire, err := decodeProposal(wire)
	require.NoError(t, err)
	assert.Equal(t, viaStd, viaWire)

	su := SecretsUpdate{Services: p.Services}
	u, err := NewSecretsUpdate("agr-1", su)
	require.NoError(t, err)
	std, err = json.Marshal(su)
	require.NoError(t, err)
	assert.Equal(t, string(std), string(u.Payload))
}

func TestDecodeProposal(t *testing.T) {
	p, err := decodeProposal([]byte(validProposal))
	require.NoError(t, err)
	assert.Equal(t, "s3cr3t", string(p.Services[0].Secrets["db"].Data["password"]))

	edit := func(old, new string) string {
		require.Contains(t, validProposal, old)
		return strings.Replace(validProposal, old, new, 1)
	}
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"over the limit", validProposal + strings.Repeat(" ", defaultMaxMessageSize), errTooLarge},
		{"not JSON", "{", errMalformed},
		{"not an object", `[1]`, errMalformed},
		{"trailing data", validProposal + `{}`, errMalformed},
		{"unknown field", edit(`"agreementId"`, `"extra":1,"agreementId"`), errMalformed},
		{"unknown field in secret details", edit(`"format":"json"`, `"format":"json","note":"x"`), errMalformed},
		{"value not base64", edit(`czNjcjN0`, `!!`), errMalformed},
		{"value base64 with a line break", edit(`czNjcjN0`, `czNj\ncjN0`), errMalformed},
		{"secret details without data", edit(`,"data":{"password":"czNjcjN0"}`, ``), errMalformed},
		{"unknown format", edit(`"format":"json"`, `"format":"yaml"`), errMalformed},
		{"version 2", edit(`"version":1`, `"version":2`), errUnsupportedVersion},
		{"no version", edit(`"version":1,`, ``), errUnsupportedVersion},
		{"version as a string", edit(`"version":1`, `"version":"1"`), errMalformed},
		{"no agreement id", edit(`"agreementId":"agr-1"`, `"agreementId":""`), errInvalidMessage},
		{"agreement id with a space", edit(`"agr-1"`, `"agr 1"`), errInvalidMessage},
		{"agreement id too long", edit(`"agr-1"`, `"`+strings.Repeat("a", 257)+`"`), errInvalidMessage},
		{"service without url", edit(`"url":"u"`, `"url":""`), errInvalidMessage},
		{"service field with a control character", edit(`"org":"o"`, `"org":"o\u0007"`), errInvalidMessage},
		{"secret name with a slash", edit(`"db"`, `"a/b"`), errInvalidMessage},
		{"secret name ..", edit(`"db"`, `".."`), errInvalidMessage},
		{"secret name .", edit(`"db"`, `"."`), errInvalidMessage},
		{"empty secret name", edit(`"db"`, `""`), errInvalidMessage},
		{"secret name with NUL", edit(`"db"`, `"d\u0000b"`), errInvalidMessage},
		{"raw format with two keys", edit(`"format":"json","data":{"password":"czNjcjN0"}`, `"format":"raw","data":{"a":"","b":""}`), errInvalidMessage},
		{"empty data key", edit(`"password"`, `""`), errInvalidMessage},
		{"service twice", edit(`]}`, `,{"service":{"org":"o","url":"u"},"secrets":{}}]}`), errInvalidMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeProposal([]byte(tc.in))
			requireKind(t, err, tc.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
			assert.NotContains(t, err.Error(), "czNjcjN0")
		})
	}
}

func TestDecodeErrorsNeverQuoteValues(t *testing.T) {
	for _, in := range []string{
		strings.Replace(validProposal, `"czNjcjN0"`, `987654321`, 1),
		strings.Replace(validProposal, `"czNjcjN0"`, `"987654321`, 1),
		strings.Replace(validProposal, `"czNjcjN0"`, `true987654321`, 1),
		strings.Replace(validProposal, `"czNjcjN0"`, `"98765432=1"`, 1),
	} {
		_, err := decodeProposal([]byte(in))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "98765432")
	}
	// encoding/json quotes a number that does not fit its field.
	_, err := decodeReply([]byte(`{"version":1,"agreementId":"a","inReplyTo":{"type":"update","sequence":-987654321},"accepted":true}`))
	requireKind(t, err, errMalformed)
	assert.NotContains(t, err.Error(), "98765432")
}

const validUpdate = `{"version":1,"agreementId":"agr-1","kind":"secrets","payload":{"services":[{"service":{"org":"o","url":"u"},"secrets":{"db":{"data":{"password":"czNjcjN0"}}}}]}}`

func TestDecodeUpdate(t *testing.T) {
	u, err := decodeUpdate([]byte(validUpdate))
	require.NoError(t, err)
	su, err := u.Secrets()
	require.NoError(t, err)
	assert.Equal(t, "s3cr3t", string(su.Services[0].Secrets["db"].Data["password"]))

	edit := func(old, new string) string {
		require.Contains(t, validUpdate, old)
		return strings.Replace(validUpdate, old, new, 1)
	}
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"over the limit", validUpdate + strings.Repeat(" ", defaultMaxMessageSize), errTooLarge},
		{"not JSON", "nope", errMalformed},
		{"version 0", edit(`"version":1`, `"version":0`), errUnsupportedVersion},
		{"kind with upper case", edit(`"kind":"secrets"`, `"kind":"Secrets"`), errInvalidMessage},
		{"kind empty", edit(`"kind":"secrets"`, `"kind":""`), errInvalidMessage},
		{"kind too long", edit(`"kind":"secrets"`, `"kind":"`+strings.Repeat("k", 65)+`"`), errInvalidMessage},
		{"no payload", edit(`,"payload":{"services":[{"service":{"org":"o","url":"u"},"secrets":{"db":{"data":{"password":"czNjcjN0"}}}}]}`, ``), errInvalidMessage},
		{"secrets payload with unknown field", edit(`{"services"`, `{"x":1,"services"`), errMalformed},
		{"secrets payload without services", edit(`{"services":[{"service":{"org":"o","url":"u"},"secrets":{"db":{"data":{"password":"czNjcjN0"}}}}]}`, `{"services":[]}`), errInvalidMessage},
		{"secrets payload with a service without secrets", edit(`"secrets":{"db":{"data":{"password":"czNjcjN0"}}}`, `"secrets":{}`), errInvalidMessage},
		{"secrets payload with a bad name", edit(`"db"`, `"../db"`), errInvalidMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeUpdate([]byte(tc.in))
			requireKind(t, err, tc.want)
			assert.NotContains(t, err.Error(), "czNjcjN0")
		})
	}

	// Unknown kinds are valid with any JSON payload.
	_, err = decodeUpdate([]byte(`{"version":1,"agreementId":"a","kind":"labels.v2","payload":[1,2]}`))
	require.NoError(t, err)
}

func TestDecodeReply(t *testing.T) {
	r, err := decodeReply([]byte(`{"version":1,"agreementId":"a","inReplyTo":{"type":"update","sequence":3},"accepted":false,"reason":"no"}`))
	require.NoError(t, err)
	assert.Equal(t, Reply{Version: 1, AgreementID: "a", InReplyTo: MessageRef{TypeUpdate, 3}, Reason: "no"}, r)

	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"over the limit", strings.Repeat(" ", defaultMaxMessageSize+1), errTooLarge},
		{"rejection without reason", `{"version":1,"agreementId":"a","accepted":false}`, errInvalidMessage},
		{"reason too long", `{"version":1,"agreementId":"a","accepted":false,"reason":"` + strings.Repeat("r", maxReasonLength+1) + `"}`, errInvalidMessage},
		{"inReplyTo without sequence", `{"version":1,"agreementId":"a","inReplyTo":{"type":"update"},"accepted":true}`, errInvalidMessage},
		{"inReplyTo with a bad type", `{"version":1,"agreementId":"a","inReplyTo":{"type":"UP","sequence":1},"accepted":true}`, errInvalidMessage},
		{"accepted not a bool", `{"version":1,"agreementId":"a","accepted":"yes"}`, errMalformed},
		{"version 3", `{"version":3,"agreementId":"a","accepted":true}`, errUnsupportedVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeReply([]byte(tc.in))
			requireKind(t, err, tc.want)
		})
	}
}

func TestCheckSecretName(t *testing.T) {
	for _, ok := range []string{"db", "db.json", "DB_PASSWORD", "my-cert.pem", "ünïcode", strings.Repeat("n", 255)} {
		assert.NoError(t, CheckSecretName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../x", "/x", "x/", "a\\b", "a\x00b", "a\nb", strings.Repeat("n", 256)} {
		assert.Error(t, CheckSecretName(bad), "%q", bad)
	}
}

func TestMessagesNeverPrintValues(t *testing.T) {
	p := proposalWithSecrets("agr-1", 2, 40)
	u, err := NewSecretsUpdate("agr-1", SecretsUpdate{Services: p.Services})
	require.NoError(t, err)
	su, err := u.Secrets()
	require.NoError(t, err)
	values := []any{p, &p, u, &u, su, p.Services[0], p.Services[0].Secrets["secret-00"]}

	var out []string
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		slog.New(h).Info("messages", "proposal", p, "update", u, "secrets", su, "service", p.Services[0], "details", p.Services[0].Secrets["secret-00"])
	}
	out = append(out, logs.String())
	for _, s := range out {
		assertNoLeak(t, s, secretForms())
	}
	assert.Contains(t, logs.String(), "secret-01", "logs name the secrets")
	assert.Contains(t, logs.String(), "agr-1")
}
