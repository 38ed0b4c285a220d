package secretstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets"
)

// Encoded prefixes of the two kinds of ContentTag.
const (
	versionTagPrefix = "version:"
	sumTagPrefix     = "sha256:"
)

// maxContentTagSize bounds what ParseContentTag accepts: store versions are
// short (a number, a UUID), and a sum tag is 71 bytes.
const maxContentTagSize = 1024

// ContentTag identifies the content of one revision of a secret without
// holding it: the store's Version when the backend keeps versions, else the
// SHA-256 of a canonical encoding of the secret's data. Two observations of a secret
// have equal tags exactly when they show the same revision; compare tags
// with ==. The zero ContentTag means "unknown".
//
// The agbot's delivery engine (package agreement/delivery) keeps the tag of
// each secret it seals into a message (Secret.ContentTag on what it read)
// and of what the agent acknowledged, so it knows whether the agent has the
// content the store holds now. It keeps tags, never values.
//
// A checksum tag can be used to test guesses of a low-entropy value, so it
// is treated like a password hash: every printed form (fmt verbs, String,
// slog, encoding/json) shows "sha256:[redacted]", and the delivery engine's
// watcher never puts one in an event. To keep a tag across an agbot
// restart, store Encode's output with the agreement, as you would a
// password hash, and read it back with ParseContentTag (encoding/json
// writes the printed form, which does not read back). Version tags print in full: versions are not secret.
type ContentTag struct {
	version string
	sum     [sha256.Size]byte
}

// ContentTag returns the tag of s's content: its Version, or the SHA-256 of
// its Data when the store keeps no versions. It matches what the delivery
// engine's watcher observes for the same revision.
func (s *Secret) ContentTag() ContentTag {
	if s.Version != "" {
		return ContentTag{version: s.Version}
	}
	return ContentTag{sum: sum256(s.Data)}
}

// Encode returns the full text form of t, for storage: "version:<version>",
// "sha256:<64 hex digits>", or "" for the zero tag. ParseContentTag reads it
// back. The checksum form must not be logged; the printed forms redact it.
func (t ContentTag) Encode() string { return t.text(false) }

// text is the tag's text form, with a checksum shown or redacted.
func (t ContentTag) text(redact bool) string {
	switch {
	case t.version != "":
		return versionTagPrefix + t.version
	case t == (ContentTag{}):
		return ""
	case redact:
		return sumTagPrefix + edgesecrets.Redacted
	}
	return sumTagPrefix + hex.EncodeToString(t.sum[:])
}

// ParseContentTag reads what Encode wrote. The empty string is the zero
// tag. Errors match edgesecrets.ErrInvalid and do not repeat a checksum.
func ParseContentTag(s string) (ContentTag, error) {
	switch {
	case s == "":
		return ContentTag{}, nil
	case len(s) > maxContentTagSize:
		return ContentTag{}, contentTagError(fmt.Sprintf("is longer than %d bytes", maxContentTagSize))
	case strings.HasPrefix(s, versionTagPrefix):
		v := s[len(versionTagPrefix):]
		if v == "" {
			return ContentTag{}, contentTagError("has an empty version")
		}
		return ContentTag{version: v}, nil
	case strings.HasPrefix(s, sumTagPrefix):
		var t ContentTag
		h := s[len(sumTagPrefix):]
		if len(h) != hex.EncodedLen(sha256.Size) {
			return ContentTag{}, contentTagError(fmt.Sprintf("checksum has %d characters, want %d hex digits", len(h), hex.EncodedLen(sha256.Size)))
		}
		if _, err := hex.Decode(t.sum[:], []byte(h)); err != nil {
			return ContentTag{}, contentTagError("checksum is not hexadecimal (a printed, redacted tag cannot be parsed: store Encode's output)")
		}
		if t == (ContentTag{}) {
			return ContentTag{}, contentTagError("checksum is all zeros")
		}
		return t, nil
	}
	shown := s
	if len(shown) > 16 {
		shown = shown[:16] + "..."
	}
	return ContentTag{}, contentTagError(fmt.Sprintf("%s does not start with %q or %q", strconv.Quote(shown), versionTagPrefix, sumTagPrefix))
}

func contentTagError(problem string) error {
	return &Error{Op: "parse content tag", Kind: edgesecrets.ErrInvalid, Err: fmt.Errorf("content tag %s", problem)}
}

// String returns "version:<version>", "sha256:[redacted]" or "none".
func (t ContentTag) String() string {
	if t == (ContentTag{}) {
		return "none"
	}
	return t.text(true)
}

// Format implements fmt.Formatter: every verb prints String's form, so a
// checksum never prints, also inside a struct printed with %+v or %#v.
func (t ContentTag) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = fmt.Fprintf(f, "secretstore.ContentTag(%q)", t.String())
		return
	}
	_, _ = io.WriteString(f, t.String())
}

// LogValue implements slog.LogValuer: String's form.
func (t ContentTag) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON implements json.Marshaler with String's form, so a tag
// encoded by accident (a struct in a JSON log line) shows no checksum. It is
// not meant to be read back: persist Encode's output.
func (t ContentTag) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(t.String())), nil }
