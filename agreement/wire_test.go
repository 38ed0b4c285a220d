package agreement

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/require"
)

// The append-style encoders must write exactly what encoding/json writes.
// The references below encode the same values through the wire types with
// encoding/json's reflection, independently of wire.go.

func referenceDetails(s SecretDetails) secretDetailsJSON {
	out := secretDetailsJSON{Format: s.Format, Data: make(map[string]string, len(s.Data))}
	for k, v := range s.Data {
		out.Data[k] = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

func referenceServices(services []ServiceSecrets) []serviceSecretsJSON {
	if services == nil {
		return nil
	}
	out := make([]serviceSecretsJSON, len(services))
	for i, ss := range services {
		out[i].Service = ss.Service
		if ss.Secrets != nil {
			out[i].Secrets = make(map[string]secretDetailsJSON, len(ss.Secrets))
		}
		for name, d := range ss.Secrets {
			out[i].Secrets[name] = referenceDetails(d)
		}
	}
	return out
}

// requireSameAsEncodingJSON encodes p, its services as a secrets update
// payload, and each of its secret details with wire.go and with the
// reference, and requires identical bytes, none of them written past the
// size computed up front.
func requireSameAsEncodingJSON(t *testing.T, p Proposal) {
	t.Helper()
	want, err := json.Marshal(proposalJSON{p.Version, p.AgreementID, referenceServices(p.Services)})
	require.NoError(t, err)
	got, err := p.encode()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "proposal")
	// A buffer that grew would leave an uncleared copy of the values behind.
	require.Equal(t, servicesMessageSize(p.AgreementID, p.Services), cap(got), "the proposal outgrew its buffer")

	// The public JSON form goes through SecretDetails.MarshalJSON.
	std, err := json.Marshal(p)
	require.NoError(t, err)
	require.Equal(t, string(want), string(std), "json.Marshal(Proposal)")

	want, err = json.Marshal(secretsUpdateJSON{referenceServices(p.Services)})
	require.NoError(t, err)
	require.Equal(t, string(want), string(encodeServicesMessage(false, 0, "", p.Services)), "secrets update payload")
	// The rotation path's one-buffer encoding of the whole update.
	wantUpdate, err := json.Marshal(Update{Version: messageVersion, AgreementID: p.AgreementID, Kind: UpdateKindSecrets, Payload: want})
	require.NoError(t, err)
	m := secretsUpdateMessage{agreementID: p.AgreementID, su: SecretsUpdate{Services: p.Services}}
	gotUpdate, err := m.encode()
	require.NoError(t, err)
	require.Equal(t, string(wantUpdate), string(gotUpdate), "secrets update")
	require.Equal(t, m.size(), cap(gotUpdate), "the secrets update outgrew its buffer")

	for _, ss := range p.Services {
		want, err := json.Marshal(referenceServices([]ServiceSecrets{ss}))
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendServices(nil, []ServiceSecrets{ss})), "services")
		for _, d := range ss.Secrets {
			want, err := json.Marshal(referenceDetails(d))
			require.NoError(t, err)
			got := appendSecretDetails(nil, d)
			require.Equal(t, string(want), string(got), "secret details")
			require.LessOrEqual(t, len(got), secretDetailsSize(d))
		}
	}
}

func TestWireEncodersWriteTheJSONForm(t *testing.T) {
	awkward := "é\"x\\<&>\u2028\u2029\x00\x7f\xff"
	cases := []struct {
		name string
		p    Proposal
	}{
		{"benchmark proposal", proposalWithSecrets("0123456789abcdef", 10, 256)},
		{"no services", Proposal{Version: 1, AgreementID: "a"}},
		{"empty services", Proposal{Version: 1, AgreementID: "a", Services: []ServiceSecrets{}}},
		{"nil secrets map", Proposal{Version: 1, AgreementID: "a", Services: []ServiceSecrets{{Service: ServiceRef{Org: "o", URL: "u"}}}}},
		{"empty secrets and data", Proposal{Version: 1, AgreementID: "a", Services: []ServiceSecrets{{
			Service: ServiceRef{Org: "o", URL: "u"},
			Secrets: map[string]SecretDetails{"none": {}, "empty": {Data: edgesecrets.Data{}}, "emptyvalue": {Data: edgesecrets.Data{"k": {}}}},
		}}}},
		{"escapes everywhere", Proposal{Version: 1, AgreementID: "agr<&>" + awkward, Services: []ServiceSecrets{
			{
				Service: ServiceRef{Org: awkward, URL: "https://x/?a=1&b=<2>", Arch: awkward, Version: "1\u2028", Container: "c\"d"},
				Secrets: map[string]SecretDetails{
					awkward: {Format: awkward, Data: edgesecrets.Data{awkward: {0xff, 0, '<'}, "b": []byte("s3cr3t"), "a": nil}},
					"B":     {Format: FormatRaw, Data: edgesecrets.Data{"k\u0001": {0xfb, 0xff, 0xbf}}},
				},
			},
			{Service: ServiceRef{Org: "o", URL: "u", Container: "two"}, Secrets: map[string]SecretDetails{"x": {Format: FormatJSON}}},
		}}},
		{"negative version", Proposal{Version: -7, AgreementID: "a"}},
	}
	// Each character encoding/json treats specially, alone in plain text.
	for _, c := range []string{`"`, `\`, "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", "\xff", "é", "\U0001F600"} {
		p := Proposal{Version: 1, AgreementID: "a" + c, Services: []ServiceSecrets{{
			Service: ServiceRef{Org: "o" + c, URL: "u" + c, Arch: c, Version: c, Container: c},
			Secrets: map[string]SecretDetails{"n" + c: {Format: c, Data: edgesecrets.Data{"k" + c: []byte(c)}}},
		}}}
		cases = append(cases, struct {
			name string
			p    Proposal
		}{"character " + strconv.QuoteToASCII(c), p})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireSameAsEncodingJSON(t, tc.p) })
	}
}

// requireHeaderSameAsEncodingJSON requires appendHeader to write what
// json.Marshal writes for h, within headerSize.
func requireHeaderSameAsEncodingJSON(t *testing.T, h Header) {
	t.Helper()
	want, err := json.Marshal(h)
	require.NoError(t, err)
	got, err := appendHeader(nil, h)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.LessOrEqual(t, len(got), headerSize(h))
}

func TestAppendHeaderWritesTheJSONForm(t *testing.T) {
	base := Header{
		Version: envelopeVersion, Suite: SuiteMLKEM768X25519, SenderKeyID: "0123456789abcdef0123456789abcdef",
		RecipientKeyID: "fedcba9876543210fedcba9876543210", Type: TypeProposal, AgreementID: "agr-1", Sequence: 1, Time: t0,
	}
	edits := map[string]func(h *Header){
		"as sealed":              func(*Header) {},
		"escaped agreement id":   func(h *Header) { h.AgreementID = "a<&>é\u2028\"\\" },
		"extreme numbers":        func(h *Header) { h.Version, h.Sequence = math.MinInt, math.MaxUint64 },
		"nanoseconds":            func(h *Header) { h.Time = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC) },
		"trailing zero nanos":    func(h *Header) { h.Time = time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC) },
		"other zone":             func(h *Header) { h.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", -(9*3600+30*60))) },
		"year 9999":              func(h *Header) { h.Time = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) },
		"zero values":            func(h *Header) { *h = Header{} },
		"unknown suite and type": func(h *Header) { h.Suite, h.Type = "x/y", "z" },
	}
	for _, c := range []string{`"`, `\`, "<", ">", "&", "\u2028", "\x00", "\x7f", "\xff", "é"} {
		edits["character "+strconv.QuoteToASCII(c)] = func(h *Header) { h.AgreementID, h.Type, h.Suite = "a"+c, MessageType(c), Suite(c) }
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			h := base
			edit(&h)
			requireHeaderSameAsEncodingJSON(t, h)
		})
	}

	t.Run("year out of range", func(t *testing.T) {
		h := base
		h.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := json.Marshal(h)
		require.Error(t, err)
		_, err = appendHeader(nil, h)
		require.ErrorContains(t, err, "year outside of range")
		_, err = Seal(mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519).Public(), []byte(nil), Header{Type: TypeReply, AgreementID: "a", Sequence: 1, Time: h.Time}, Options{})
		require.ErrorContains(t, err, "encoding header")
	})
}

// FuzzWireEncoders checks byte identity with encoding/json for arbitrary
// strings and values in every position of a proposal and a header.
func FuzzWireEncoders(f *testing.F) {
	f.Add("agr-1", "myorg", "https://example.com/svc", "secret-01", "json", "password", []byte("s3cr3t"))
	f.Add("a<&>", "o\u2028", "u\"\\", "é", "", "k\x01", []byte{0xff, 0})
	f.Add("\xff\xfe", "\x7f", "</script>", "..", "raw", "", []byte(nil))
	f.Fuzz(func(t *testing.T, agreementID, org, url, name, format, key string, value []byte) {
		p := Proposal{Version: 1, AgreementID: agreementID, Services: []ServiceSecrets{{
			Service: ServiceRef{Org: org, URL: url, Arch: key, Version: format, Container: name},
			Secrets: map[string]SecretDetails{
				name:          {Format: format, Data: edgesecrets.Data{key: value, strings.ToUpper(key): value}},
				name + "\x00": {Data: edgesecrets.Data{}},
			},
		}}}
		requireSameAsEncodingJSON(t, p)

		requireHeaderSameAsEncodingJSON(t, Header{Version: 1, Suite: Suite(format), SenderKeyID: KeyID(org), RecipientKeyID: KeyID(url),
			Type: MessageType(name), AgreementID: agreementID, Sequence: uint64(len(value)), Time: t0})
	})
}
