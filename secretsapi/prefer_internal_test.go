package secretsapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPreferredWait(t *testing.T) {
	cases := []struct {
		values []string
		want   time.Duration // 0: none
	}{
		{nil, 0},
		{[]string{"wait=2"}, 2 * time.Second},
		{[]string{"respond-async, wait=5"}, 5 * time.Second},
		{[]string{"return=minimal", "Wait = 7 "}, 7 * time.Second},
		{[]string{`wait="3"`}, 3 * time.Second},
		{[]string{"wait=0"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait=soon"}, 0},
		{[]string{"wait=99999999999"}, 0},
		{[]string{"wait=86400"}, maxPreferredWait},
		{[]string{"waiting=3"}, 0},
		{[]string{"wait"}, 0},
	}
	for _, c := range cases {
		hdr := http.Header{}
		for _, v := range c.values {
			hdr.Add("Prefer", v)
		}
		got, ok := preferredWait(hdr)
		assert.Equal(t, c.want, got, "%q", c.values)
		assert.Equal(t, c.want != 0, ok, "%q", c.values)
	}
}

func FuzzPreferredWait(f *testing.F) {
	for _, s := range []string{"wait=2", "respond-async, wait=5", "wait=", `wait=""`, ",,=,", "wait=18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := preferredWait(http.Header{"Prefer": {v}})
		if ok && (got < time.Second || got > maxPreferredWait) {
			t.Fatalf("wait %v out of range for %q", got, v)
		}
		if !ok && got != 0 {
			t.Fatalf("no preference but a wait of %v", got)
		}
	})
}
