package ohversion

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"1": "1.0.0", "1.2": "1.2.0", "1.2.3": "1.2.3", "01.002.3": "1.2.3"} {
		v, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v.String())
	}
	for _, in := range []string{"", "1.2.3.4", "1..2", "a", "1.2.x", "-1", "1.2.3-beta", "1234567890", " 1"} {
		_, err := Parse(in)
		assert.Error(t, err, in)
	}
	a, _ := Parse("1.2")
	b, _ := Parse("1.10")
	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 1, b.Compare(a))
	assert.Equal(t, 0, a.Compare(a))
}

func TestVersionRange(t *testing.T) {
	cases := []struct {
		in      string
		canon   string
		in1     []string // versions inside
		out     []string // versions outside
		wantErr string
	}{
		{in: "1.2.3", canon: "[1.2.3,INFINITY)", in1: []string{"1.2.3", "1.3", "99"}, out: []string{"1.2.2", "0.9"}},
		{in: "[1.0.0,2.0.0)", canon: "[1.0.0,2.0.0)", in1: []string{"1.0.0", "1.99.99"}, out: []string{"0.9.9", "2.0.0"}},
		{in: "(1.0.0,2.0.0]", canon: "(1.0.0,2.0.0]", in1: []string{"1.0.1", "2.0.0"}, out: []string{"1.0.0", "2.0.1"}},
		{in: "[1.0.0,INFINITY)", canon: "[1.0.0,INFINITY)", in1: []string{"1.0.0", "1000"}, out: []string{"0.1"}},
		{in: "(1,INFINITY]", canon: "(1.0.0,INFINITY)", in1: []string{"1.0.1"}, out: []string{"1"}},
		{in: "[1.5,1.5]", canon: "[1.5.0,1.5.0]", in1: []string{"1.5.0"}, out: []string{"1.5.1", "1.4.9"}},
		{in: "", wantErr: "empty"},
		{in: "[1.0.0, 2.0.0)", wantErr: "whitespace"},
		{in: "[1.0.0,2.0.0", wantErr: "end with"},
		{in: "[1.0.0)", wantErr: "two bounds"},
		{in: "[1,2,3)", wantErr: "two bounds"},
		{in: "[x,2)", wantErr: "lower bound"},
		{in: "[1,y)", wantErr: "upper bound"},
		{in: "[INFINITY,2)", wantErr: "lower bound"},
		{in: "[2.0.0,1.0.0)", wantErr: "no version"},
		{in: "[1.0.0,1.0.0)", wantErr: "no version"},
		{in: "(1.0.0,1.0.0]", wantErr: "no version"},
		{in: "abc", wantErr: "neither a version nor an interval"},
		{in: "[", wantErr: "end with"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			r, err := ParseRange(c.in)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.canon, r.String())
			for _, s := range c.in1 {
				v, err := Parse(s)
				require.NoError(t, err)
				assert.True(t, r.Contains(v), "%s in %s", s, c.in)
			}
			for _, s := range c.out {
				v, err := Parse(s)
				require.NoError(t, err)
				assert.False(t, r.Contains(v), "%s not in %s", s, c.in)
			}
		})
	}
	var anyRange Range
	v0, _ := Parse("0")
	assert.True(t, anyRange.Contains(v0), "the zero range holds every version")
	assert.Equal(t, "[0.0.0,INFINITY)", anyRange.String())
}

func FuzzParseVersionRange(f *testing.F) {
	for _, s := range []string{"1.2.3", "[1.0.0,2.0.0)", "(1,INFINITY]", "[1,1]", "", "[,)", "(((", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			return
		}
		back, err := ParseRange(r.String())
		require.NoError(t, err)
		require.Equal(t, r, back)
		require.True(t, r.Contains(r.lo) || r.loOpen, "a non-empty range")
	})
}

func TestArch(t *testing.T) {
	assert.True(t, ArchMatches("", "arm64"))
	assert.True(t, ArchMatches("*", "arm64"))
	assert.True(t, ArchMatches("arm64", "arm64"))
	assert.False(t, ArchMatches("amd64", "arm64"))
	for _, ok := range []string{"", "*", "amd64", "ppc64le", "s390x", "arm_v7", "x86-64", "a.b"} {
		assert.NoError(t, CheckArch(ok), ok)
	}
	for _, bad := range []string{"amd 64", "amd64,arm64", "**", "arm/v7", strings.Repeat("a", 65), "amd64\n"} {
		assert.Error(t, CheckArch(bad), bad)
	}
}
