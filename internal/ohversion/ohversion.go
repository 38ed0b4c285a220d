// Package ohversion is Open Horizon's service versions, version ranges and
// architecture patterns, as service definitions, patterns, deployment
// policies and secret bindings write them.
package ohversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is an Open Horizon service version: one to three dot-separated
// decimal numbers ("1", "1.2", "1.2.3"); missing parts are zero.
type Version struct {
	parts [3]int
}

// maxVersionDigits keeps every part far from int overflow.
const maxVersionDigits = 9

// Parse parses an Open Horizon version string.
func Parse(s string) (Version, error) {
	var v Version
	if s == "" {
		return v, errors.New("version is empty")
	}
	segs := strings.Split(s, ".")
	if len(segs) > 3 {
		return v, fmt.Errorf("version %q has more than three parts", s)
	}
	for i, seg := range segs {
		if seg == "" || len(seg) > maxVersionDigits || strings.Trim(seg, "0123456789") != "" {
			return v, fmt.Errorf("version %q: part %d is not a number of at most %d digits", s, i+1, maxVersionDigits)
		}
		v.parts[i], _ = strconv.Atoi(seg)
	}
	return v, nil
}

// String returns the version as "x.y.z".
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.parts[0], v.parts[1], v.parts[2])
}

// Compare returns -1, 0 or +1 as v is lower than, equal to or higher than w.
func (v Version) Compare(w Version) int {
	for i := range v.parts {
		switch {
		case v.parts[i] < w.parts[i]:
			return -1
		case v.parts[i] > w.parts[i]:
			return 1
		}
	}
	return 0
}

// Infinity is the upper bound of an open-ended Open Horizon version range.
const Infinity = "INFINITY"

// Range is an Open Horizon version range. The zero value is
// [0.0.0,INFINITY): every version.
type Range struct {
	lo, hi              Version
	loOpen, hiInclusive bool
	hiBounded           bool
}

// ParseRange parses a range in Open Horizon form: a bare version
// "1.2.3" (meaning [1.2.3,INFINITY)), or an interval "[1.0.0,2.0.0)",
// "(1.0.0,2.0.0]", "[1.0.0,INFINITY)". Whitespace is not allowed, and an
// interval must contain at least one version.
func ParseRange(s string) (Range, error) {
	var r Range
	if s == "" {
		return r, errors.New("version range is empty")
	}
	if strings.ContainsFunc(s, func(c rune) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }) {
		return r, fmt.Errorf("version range %q contains whitespace", s)
	}
	if s[0] != '[' && s[0] != '(' {
		lo, err := Parse(s)
		if err != nil {
			return r, fmt.Errorf("version range %q is neither a version nor an interval: %w", s, err)
		}
		r.lo = lo
		return r, nil
	}
	last := s[len(s)-1]
	if len(s) < 2 || (last != ']' && last != ')') {
		return r, fmt.Errorf("version range %q does not end with ')' or ']'", s)
	}
	lo, hi, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok || strings.Contains(hi, ",") {
		return r, fmt.Errorf("version range %q must have exactly two bounds separated by a comma", s)
	}
	var err error
	if r.lo, err = Parse(lo); err != nil {
		return r, fmt.Errorf("version range %q: lower bound: %w", s, err)
	}
	r.loOpen = s[0] == '('
	if hi != Infinity {
		if r.hi, err = Parse(hi); err != nil {
			return r, fmt.Errorf("version range %q: upper bound: %w", s, err)
		}
		r.hiBounded, r.hiInclusive = true, last == ']'
		c := r.lo.Compare(r.hi)
		if c > 0 || (c == 0 && (r.loOpen || !r.hiInclusive)) {
			return r, fmt.Errorf("version range %q contains no version", s)
		}
	}
	return r, nil
}

// Contains reports whether v lies in the range.
func (r Range) Contains(v Version) bool {
	c := v.Compare(r.lo)
	if c < 0 || (c == 0 && r.loOpen) {
		return false
	}
	if !r.hiBounded {
		return true
	}
	c = v.Compare(r.hi)
	return c < 0 || (c == 0 && r.hiInclusive)
}

// String returns the range in interval form, e.g. "[1.0.0,INFINITY)".
func (r Range) String() string {
	lo, hi, end := "[", Infinity, ")"
	if r.loOpen {
		lo = "("
	}
	if r.hiBounded {
		hi = r.hi.String()
		if r.hiInclusive {
			end = "]"
		}
	}
	return lo + r.lo.String() + "," + hi + end
}

// Exact returns the range holding v alone.
func Exact(v Version) Range {
	return Range{lo: v, hi: v, hiBounded: true, hiInclusive: true}
}

// AnyArch is the architecture pattern that matches every architecture; the
// empty string does too.
const AnyArch = "*"

// ArchMatches reports whether arch matches pattern: pattern "" or "*"
// matches any architecture, anything else only itself.
func ArchMatches(pattern, arch string) bool {
	return pattern == "" || pattern == AnyArch || pattern == arch
}

// CheckArch accepts "", "*" and names made of letters, digits, '_', '-' and '.'
// ("amd64", "arm64", "ppc64le").
func CheckArch(arch string) error {
	if arch == "" || arch == AnyArch {
		return nil
	}
	if len(arch) > 64 {
		return errors.New("architecture is longer than 64 bytes")
	}
	for _, c := range arch {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return fmt.Errorf("architecture %q may hold only letters, digits, '_', '-' and '.'", arch)
		}
	}
	return nil
}
