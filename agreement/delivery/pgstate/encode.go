package pgstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/internal/recordcodec"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// A record is a row of the agreements table: the fields the database
// itself selects or changes are columns (id, node, revision, next_attempt,
// attempts and the lease), the services registered with it are a JSONB
// column written once by Create, and the rest of the record, which only
// the engine reads, is the JSONB body below. The body's types are this
// package's own, with short stable keys, so that a change to the delivery
// types cannot change the stored form unnoticed: the round-trip test fills
// every field of state.Record by reflection and fails on one the body
// drops.

// body is the stored form of a record's fields that are not columns.
type body struct {
	Slots         []slot        `json:"slots,omitempty"`
	Phase         uint8         `json:"phase,omitempty"`
	Cancel        *cancellation `json:"cancel,omitempty"`
	Held          *cancellation `json:"held,omitempty"`
	Proposed      bool          `json:"proposed,omitempty"`
	AgentKey      string        `json:"agentKey,omitempty"`
	Epoch         uint64        `json:"epoch,omitempty"`
	Counter       uint32        `json:"counter,omitempty"`
	InFlight      *sent         `json:"inFlight,omitempty"`
	ReplySequence uint64        `json:"replySequence,omitempty"`
	LastError     string        `json:"lastError,omitempty"`
	Rejection     string        `json:"rejection,omitempty"`
	Unanswered    stamp         `json:"unanswered,omitzero"`
	LastReply     stamp         `json:"lastReply,omitzero"`
	CreatedAt     stamp         `json:"createdAt,omitzero"`
	UpdatedAt     stamp         `json:"updatedAt,omitzero"`
}

type slot struct {
	Service int     `json:"service"`
	Name    string  `json:"name"`
	Desired content `json:"desired,omitzero"`
	Acked   content `json:"acked,omitzero"`
}

// content is a state.Content with its tag in full text form
// (secretstore.ContentTag.Encode): a version, or a checksum of the value,
// never the value.
type content struct {
	StoreName string `json:"store,omitempty"`
	Tag       string `json:"tag,omitempty"`
}

type cancellation struct {
	Reason    string `json:"reason,omitempty"`
	StoreName string `json:"store,omitempty"`
	Kind      uint8  `json:"kind,omitempty"` // state.ObservedState's numbers (Missing 2, Forbidden 3) are the stored format
	DecidedAt stamp  `json:"decidedAt,omitzero"`
	Notified  bool   `json:"notified,omitempty"`
}

type sent struct {
	Type     string          `json:"type"`
	Kind     string          `json:"kind,omitempty"`
	Sequence uint64          `json:"sequence"`
	Contents map[int]content `json:"contents,omitempty"`
	AgentKey string          `json:"agentKey,omitempty"`
	At       stamp           `json:"at,omitzero"`
}

// service is the stored form of a binding.ServiceBinding.
type service struct {
	Org       string                 `json:"org"`
	URL       string                 `json:"url"`
	Arch      string                 `json:"arch,omitempty"`
	Version   string                 `json:"version,omitempty"`
	Container string                 `json:"container,omitempty"`
	Secrets   map[string]boundSecret `json:"secrets,omitempty"`
}

type boundSecret struct {
	StoreNames []string `json:"storeNames"`
	Format     string   `json:"format,omitempty"`
}

// stamp is a time in RFC 3339 form with nanoseconds, in UTC; the zero
// time is omitted.
type stamp struct{ time.Time }

func (s stamp) IsZero() bool { return s.Time.IsZero() }

func (s stamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + s.UTC().Format(time.RFC3339Nano) + `"`), nil
}

func (s *stamp) UnmarshalJSON(b []byte) error {
	var text string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && !bytes.ContainsAny(b[1:n-1], `"\`) {
		// As MarshalJSON writes it: no escapes, so the text is the bytes
		// between the quotes (a record's review decodes four stamps).
		text = string(b[1 : n-1])
	} else if err := json.Unmarshal(b, &text); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return err
	}
	s.Time = t.UTC()
	return nil
}

// errBadInput: a record, observation, wait or member id names something
// PostgreSQL text cannot hold exactly (invalid UTF-8 or a NUL byte).
// Nothing of the call is stored. It matches edgesecrets.ErrInvalid.
var errBadInput = errkind.New("pgstate: bad input", edgesecrets.ErrInvalid)

// checker collects the first problem of the strings a record names: a
// PostgreSQL text value holds valid UTF-8 without NUL bytes, and these
// strings (ids, names, tags) must come back exactly.
type checker struct {
	what string
	err  error
}

func (c *checker) check(field, s string) string {
	if c.err == nil && (!utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0) {
		c.err = fmt.Errorf("%w: %s: %s %q is not valid UTF-8 text (invalid bytes or a NUL byte)", errBadInput, c.what, field, s)
	}
	return s
}

// freeText makes a diagnostic text storable: invalid UTF-8 and NUL bytes
// become U+FFFD. Reasons and errors may quote what an agent or a library
// said; failing every later Update for them would strand the agreement.
func freeText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func (c *checker) content(field string, v state.Content) content {
	return content{StoreName: c.check(field+" store name", v.StoreName), Tag: c.check(field+" content tag", v.Tag.Encode())}
}

func (c *checker) cancellation(v *state.Cancellation) *cancellation {
	if v == nil {
		return nil
	}
	return &cancellation{
		Reason: freeText(v.Reason), StoreName: c.check("cancellation store name", v.StoreName), Kind: uint8(v.Kind),
		DecidedAt: stamp{v.DecidedAt}, Notified: v.Notified,
	}
}

// encodeBody returns the stored body of r, or an error naming the first
// string that PostgreSQL could not keep exactly.
func encodeBody(r *state.Record) ([]byte, error) {
	c := &checker{what: "record " + quote(r.ID)}
	b := body{
		Phase:         uint8(r.Phase),
		Cancel:        c.cancellation(r.Cancel),
		Held:          c.cancellation(r.Held),
		Proposed:      r.Proposed,
		AgentKey:      c.check("agent key", string(r.AgentKey)),
		Epoch:         r.Epoch,
		Counter:       r.Counter,
		ReplySequence: r.ReplySequence,
		LastError:     freeText(r.LastError),
		Rejection:     freeText(r.Rejection),
		Unanswered:    stamp{r.Unanswered},
		LastReply:     stamp{r.LastReply},
		CreatedAt:     stamp{r.CreatedAt},
		UpdatedAt:     stamp{r.UpdatedAt},
	}
	for _, s := range r.Slots {
		b.Slots = append(b.Slots, slot{
			Service: s.Service, Name: c.check("slot name", s.Name),
			Desired: c.content("desired", s.Desired), Acked: c.content("acknowledged", s.Acked),
		})
	}
	if in := r.InFlight; in != nil {
		b.InFlight = &sent{
			Type: c.check("message type", string(in.Type)), Kind: c.check("update kind", in.Kind), Sequence: in.Sequence,
			AgentKey: c.check("agent key", string(in.AgentKey)), At: stamp{in.At},
		}
		if len(in.Contents) > 0 {
			b.InFlight.Contents = make(map[int]content, len(in.Contents))
			for i, v := range in.Contents {
				b.InFlight.Contents[i] = c.content("in-flight", v)
			}
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return json.Marshal(b)
}

// bodyBinFormat is the format byte in front of a binary body.
const bodyBinFormat byte = 1

// encodeBodyBin encodes r's body fields in binary (package recordcodec):
// what the agbots read. Text fields are kept exactly; the JSON body beside
// it, for agbots of older versions, has them made storable.
func encodeBodyBin(r *state.Record) []byte {
	e := recordcodec.Encoder{B: make([]byte, 1, 256)}
	e.B[0] = bodyBinFormat
	e.AppendBody(r)
	return e.B
}

// decodeBodyBin fills r's body fields from their binary form.
func decodeBodyBin(r *state.Record, data []byte) error {
	d := recordcodec.Decoder{B: data}
	if f := d.Byte(); d.Err == nil && f != bodyBinFormat {
		return fmt.Errorf("%w: binary body format %d is not known to this version of edgesecrets", recordcodec.ErrCorrupt, f)
	}
	return d.Body(r, false)
}

// decodeBody fills r's body fields from their stored form.
func decodeBody(r *state.Record, data []byte) error {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	r.Phase = state.Phase(b.Phase)
	r.Cancel = decodeCancellation(b.Cancel)
	r.Held = decodeCancellation(b.Held)
	r.Proposed = b.Proposed
	r.AgentKey = agreement.KeyID(b.AgentKey)
	r.Epoch, r.Counter, r.ReplySequence = b.Epoch, b.Counter, b.ReplySequence
	r.LastError, r.Rejection = b.LastError, b.Rejection
	r.Unanswered, r.LastReply, r.CreatedAt, r.UpdatedAt = b.Unanswered.Time, b.LastReply.Time, b.CreatedAt.Time, b.UpdatedAt.Time
	r.Slots = nil
	for _, s := range b.Slots {
		desired, err := decodeContent(s.Desired)
		if err != nil {
			return err
		}
		acked, err := decodeContent(s.Acked)
		if err != nil {
			return err
		}
		r.Slots = append(r.Slots, state.Slot{Service: s.Service, Name: s.Name, Desired: desired, Acked: acked})
	}
	r.InFlight = nil
	if in := b.InFlight; in != nil {
		r.InFlight = &state.Sent{
			Type: agreement.MessageType(in.Type), Kind: in.Kind, Sequence: in.Sequence,
			AgentKey: agreement.KeyID(in.AgentKey), At: in.At.Time,
		}
		if len(in.Contents) > 0 {
			r.InFlight.Contents = make(map[int]state.Content, len(in.Contents))
			for i, v := range in.Contents {
				c, err := decodeContent(v)
				if err != nil {
					return err
				}
				r.InFlight.Contents[i] = c
			}
		}
	}
	return nil
}

func decodeContent(c content) (state.Content, error) {
	tag, err := secretstore.ParseContentTag(c.Tag)
	if err != nil {
		return state.Content{}, err
	}
	return state.Content{StoreName: c.StoreName, Tag: tag}, nil
}

func decodeCancellation(c *cancellation) *state.Cancellation {
	if c == nil {
		return nil
	}
	return &state.Cancellation{
		Reason: c.Reason, StoreName: c.StoreName, Kind: state.ObservedState(c.Kind),
		DecidedAt: c.DecidedAt.Time, Notified: c.Notified,
	}
}

// encodeServices returns the stored form of a record's services and the
// distinct store names they bind, or an error naming the first string
// PostgreSQL could not keep exactly.
func encodeServices(id string, services []binding.ServiceBinding) ([]byte, []string, error) {
	c := &checker{what: "record " + quote(id)}
	out := make([]service, len(services))
	for i, sb := range services {
		ref := sb.Service
		out[i] = service{
			Org: c.check("service org", ref.Org), URL: c.check("service url", ref.URL), Arch: c.check("service arch", ref.Arch),
			Version: c.check("service version", ref.Version), Container: c.check("service container", ref.Container),
		}
		if len(sb.Secrets) > 0 {
			out[i].Secrets = make(map[string]boundSecret, len(sb.Secrets))
		}
		for name, b := range sb.Secrets {
			for _, n := range b.StoreNames {
				c.check("store name", n)
			}
			out[i].Secrets[c.check("service secret name", name)] = boundSecret{StoreNames: b.StoreNames, Format: c.check("secret format", b.Format)}
		}
	}
	if c.err != nil {
		return nil, nil, c.err
	}
	data, err := json.Marshal(out)
	return data, state.StoreNames(services), err
}

// maxCachedServices bounds a servicesCache: past it, the cache starts
// again empty.
const maxCachedServices = 4096

// servicesCache keeps the decoded services by their stored form: the
// agreements of one deployment store the same services, so a review's
// slice decodes each distinct one once, not once per record (JSON decoding
// was most of an idle interval's agbot time). Its methods are safe for
// concurrent use.
type servicesCache struct {
	mu sync.Mutex
	m  map[string][]binding.ServiceBinding
}

// servicesUse says whose the decoded services of a record are.
type servicesUse bool

const (
	// ownServices: the caller's own copy, as state.Backend promises.
	ownServices servicesUse = false
	// sharedServices: the cache's, shared with every record read with
	// the same services, for a caller that only reads them
	// (state.SharedReview.ReviewNext's): a copy per record was a quarter
	// of what an idle interval's review allocates.
	sharedServices servicesUse = true
)

// decode returns the services stored as data, a copy of its own for the
// caller unless use is sharedServices.
func (c *servicesCache) decode(data []byte, use servicesUse) ([]binding.ServiceBinding, error) {
	c.mu.Lock()
	v, ok := c.m[string(data)]
	c.mu.Unlock()
	if !ok {
		var err error
		if v, err = decodeServices(data); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCachedServices {
			c.m = map[string][]binding.ServiceBinding{}
		}
		c.m[string(data)] = v
		c.mu.Unlock()
	}
	if use == sharedServices {
		return v, nil
	}
	return state.Record{Services: v}.Clone().Services, nil
}

func decodeServices(data []byte) ([]binding.ServiceBinding, error) {
	var stored []service
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil, err
	}
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]binding.ServiceBinding, len(stored))
	for i, s := range stored {
		out[i].Service = agreement.ServiceRef{Org: s.Org, URL: s.URL, Arch: s.Arch, Version: s.Version, Container: s.Container}
		if len(s.Secrets) > 0 {
			out[i].Secrets = make(map[string]binding.BoundSecret, len(s.Secrets))
		}
		for name, b := range s.Secrets {
			out[i].Secrets[name] = binding.BoundSecret{StoreNames: b.StoreNames, Format: b.Format}
		}
	}
	return out, nil
}
