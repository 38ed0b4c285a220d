package agreement

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
)

// Append-style encoders of the fixed wire types. Sealing is on the agbot's
// hot path, and encoding/json spends more time in reflection, map sorting
// and intermediate base64 strings than the AEAD spends encrypting the
// result. These write exactly the bytes json.Marshal writes for the same
// values (tests compare them with encoding/json over the wire types), into
// one buffer sized up front: when a proposal is sealed, the only copy of a
// secret value's base64 is that buffer, which sealMessage clears afterwards
// (encoding/json left a string per value and a grown buffer's old copies to
// the garbage collector).

// appendJSONString appends s as encoding/json writes it (HTML-safe
// escaping). Strings of plain printable ASCII (names, key ids, most
// agreement ids) take the fast path; anything else is left to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if !plainJSONByte(s[i]) {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSONByte reports whether encoding/json writes c unchanged inside a
// string: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML.
func plainJSONByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// jsonStringSize bounds the length of appendJSONString(nil, s): at most six
// bytes (\u00XX) per input byte, two quotes.
func jsonStringSize(s string) int {
	for i := range len(s) {
		if !plainJSONByte(s[i]) {
			return 6*len(s) + 2
		}
	}
	return len(s) + 2
}

// sortedKeys appends the keys of m to buf and sorts them. It grows buf once
// at most, where slices.Sorted(maps.Keys(m)) grows its slice key by key.
func sortedKeys[V any](buf []string, m map[string]V) []string {
	buf = slices.Grow(buf, len(m))
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

// appendField appends `"name":` (name is a constant of plain ASCII),
// preceded by a comma unless it is the first field.
func appendField(b []byte, name string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendSecretDetails writes the JSON form of SecretDetails: the format
// (omitted when empty) and the values in base64, keys sorted.
func appendSecretDetails(b []byte, s SecretDetails) []byte {
	b = append(b, '{')
	if s.Format != "" {
		b = appendField(b, "format", true)
		b = appendJSONString(b, s.Format)
		b = append(b, ',')
	}
	b = appendField(b, "data", true)
	b = append(b, '{')
	var buf [8]string
	for i, k := range sortedKeys(buf[:0], s.Data) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':', '"')
		b = base64.StdEncoding.AppendEncode(b, s.Data[k])
		b = append(b, '"')
	}
	return append(b, '}', '}')
}

func secretDetailsSize(s SecretDetails) int {
	n := len(`{"format":,"data":{}}`) + jsonStringSize(s.Format)
	for k, v := range s.Data {
		n += jsonStringSize(k) + len(`:"",`) + base64.StdEncoding.EncodedLen(len(v))
	}
	return n
}

func appendServiceRef(b []byte, r ServiceRef) []byte {
	b = append(b, '{')
	b = appendField(b, "org", true)
	b = appendJSONString(b, r.Org)
	b = appendField(b, "url", false)
	b = appendJSONString(b, r.URL)
	for _, f := range [...]struct{ name, val string }{{"arch", r.Arch}, {"version", r.Version}, {"container", r.Container}} {
		if f.val != "" {
			b = appendField(b, f.name, false)
			b = appendJSONString(b, f.val)
		}
	}
	return append(b, '}')
}

func serviceRefSize(r ServiceRef) int {
	return len(`{"org":,"url":,"arch":,"version":,"container":}`) + jsonStringSize(r.Org) + jsonStringSize(r.URL) +
		jsonStringSize(r.Arch) + jsonStringSize(r.Version) + jsonStringSize(r.Container)
}

// appendServices writes a []ServiceSecrets as json.Marshal writes it
// (null for nil, a nil Secrets map as null), secret names sorted.
func appendServices(b []byte, services []ServiceSecrets) []byte {
	if services == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, ss := range services {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendField(b, "service", true)
		b = appendServiceRef(b, ss.Service)
		b = appendField(b, "secrets", false)
		if ss.Secrets == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '{')
			for j, name := range ss.secretNames() {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, name)
				b = append(b, ':')
				b = appendSecretDetails(b, ss.Secrets[name])
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func servicesSize(services []ServiceSecrets) int {
	n := len(`null`)
	for _, ss := range services {
		n += len(`{"service":,"secrets":null},`) + serviceRefSize(ss.Service)
		for name, d := range ss.Secrets {
			n += jsonStringSize(name) + len(`:,`) + secretDetailsSize(d)
		}
	}
	return n
}

// encodeServicesMessage writes `{"version":V,"agreementId":"ID","services":…}`
// (version and agreement id only when withHead), the form of a proposal and,
// without them, of a secrets update's payload, into a buffer sized to hold
// it without growing.
func encodeServicesMessage(withHead bool, version int, agreementID string, services []ServiceSecrets) []byte {
	b := make([]byte, 0, servicesMessageSize(agreementID, services))
	b = append(b, '{')
	if withHead {
		b = appendField(b, "version", true)
		b = strconv.AppendInt(b, int64(version), 10)
		b = appendField(b, "agreementId", false)
		b = appendJSONString(b, agreementID)
	}
	b = appendField(b, "services", !withHead)
	b = appendServices(b, services)
	return append(b, '}')
}

func servicesMessageSize(agreementID string, services []ServiceSecrets) int {
	return len(`{"version":,"agreementId":,"services":}`) + 20 + jsonStringSize(agreementID) + servicesSize(services)
}

// appendHeader writes the JSON form of h, as json.Marshal(h) does. It fails
// only for a time whose year is outside [0,9999].
func appendHeader(b []byte, h Header) ([]byte, error) {
	b = append(b, '{')
	b = appendField(b, "version", true)
	b = strconv.AppendInt(b, int64(h.Version), 10)
	for _, f := range [...]struct{ name, val string }{
		{"suite", string(h.Suite)},
		{"senderKeyId", string(h.SenderKeyID)},
		{"recipientKeyId", string(h.RecipientKeyID)},
		{"type", string(h.Type)},
		{"agreementId", h.AgreementID},
	} {
		b = appendField(b, f.name, false)
		b = appendJSONString(b, f.val)
	}
	b = appendField(b, "sequence", false)
	b = strconv.AppendUint(b, h.Sequence, 10)
	b = appendField(b, "time", false)
	b = append(b, '"')
	b, err := h.Time.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"', '}'), nil
}

// headerSize bounds the length of appendHeader's output.
func headerSize(h Header) int {
	return len(`{"version":,"suite":,"senderKeyId":,"recipientKeyId":,"type":,"agreementId":,"sequence":,"time":""}`) +
		2*20 + jsonStringSize(string(h.Suite)) + jsonStringSize(string(h.SenderKeyID)) + jsonStringSize(string(h.RecipientKeyID)) +
		jsonStringSize(string(h.Type)) + jsonStringSize(h.AgreementID) + len(timeLayoutMax)
}

// timeLayoutMax is as long as the longest time AppendText writes.
const timeLayoutMax = "2006-01-02T15:04:05.999999999Z07:00"
