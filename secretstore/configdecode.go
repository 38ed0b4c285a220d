package secretstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// member is one member of a JSON object, in document order.
type member struct {
	name string
	raw  json.RawMessage
}

// objectMembers returns the members of the JSON object raw.
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{name: name, raw: v})
	}
	return ms, nil
}

// jsonField is a struct field encoding/json decodes, by its JSON name.
type jsonField struct {
	index []int
	typ   reflect.Type
}

// jsonFields lists the fields encoding/json would decode into a struct
// of type t, by JSON name, embedded structs' fields included.
func jsonFields(t reflect.Type) map[string]jsonField {
	fields := map[string]jsonField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" && !strings.Contains(tag, ","):
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for n, sub := range jsonFields(f.Type) {
				if _, shadowed := fields[n]; !shadowed {
					fields[n] = jsonField{index: append([]int{i}, sub.index...), typ: sub.typ}
				}
			}
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		fields[name] = jsonField{index: []int{i}, typ: f.Type}
	}
	return fields
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// decodeEach decodes the JSON object raw into the struct v points to, one
// member at a time, so that a member that does not fit its field leaves the
// others decoded, and returns every problem: members whose values do not
// fit, unknown members (with a suggestion for a near miss), in nested
// objects too, each prefixed with path.
func decodeEach(path string, raw json.RawMessage, v reflect.Value) []string {
	members, err := objectMembers(raw)
	if err != nil {
		return []string{path + ": must be a JSON object"}
	}
	t := v.Elem().Type()
	fields := jsonFields(t)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	var problems []string
	for _, m := range members {
		f, ok := fields[m.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s", path, unknownField(m.name, names)))
			continue
		}
		dst := v.Elem().FieldByIndex(f.index)
		if f.typ.Kind() == reflect.Struct && !reflect.PointerTo(f.typ).Implements(jsonUnmarshaler) && isJSONObject(m.raw) && string(bytes.TrimSpace(m.raw)) != "null" {
			problems = append(problems, decodeEach(path+"."+m.name, m.raw, dst.Addr())...)
			continue
		}
		// Decode the member alone into a fresh struct, so its field's tag
		// options (",string") apply, then keep the field.
		one, _ := json.Marshal(map[string]json.RawMessage{m.name: m.raw})
		tmp := reflect.New(t)
		if err := json.Unmarshal(one, tmp.Interface()); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s", path, describeMember(m.name, err)))
			continue
		}
		dst.Set(tmp.Elem().FieldByIndex(f.index))
	}
	return problems
}

// describeMember describes a failure to decode member name without
// quoting its value.
func describeMember(name string, err error) string {
	msg := jsonProblem(err)
	if strings.HasPrefix(msg, "field ") {
		return msg
	}
	return fmt.Sprintf("field %q: %s", name, msg)
}

// unknownField reports an unknown member, suggesting the known name it
// most likely misspells.
func unknownField(name string, known []string) string {
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	if s := suggest(name, known); s != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", shown, s)
	}
	return fmt.Sprintf("unknown field %q", shown)
}

// suggest returns the name among known that name most likely misspells:
// the same but for case, or at most two edits away (one for short names);
// "" when none is that close.
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if strings.EqualFold(name, k) {
			return k
		}
		limit := 2
		if len(k) <= 4 {
			limit = 1
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d <= limit && (d < bestD || (d == bestD && k < best)) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the edit distance between a and b in bytes, counting a
// transposition of neighbours as one edit, or a large number for long
// inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	before := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1) // a transposition
			}
		}
		before, prev, cur = prev, cur, before
	}
	return prev[len(b)]
}
