package promtest

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []Sample
	}{
		{"vector", `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"__name__":"up","job":"a"},"value":[1700000000.5,"1"]},
			{"metric":{},"value":[1700000000,"2.5"]}]}}`,
			[]Sample{{Labels: map[string]string{"__name__": "up", "job": "a"}, Value: 1}, {Labels: map[string]string{}, Value: 2.5}}},
		{"empty vector", `{"status":"success","data":{"resultType":"vector","result":[]}}`, []Sample{}},
		{"series without metric", `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"3"]}]}}`,
			[]Sample{{Labels: map[string]string{}, Value: 3}}},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"-Inf"]}}`,
			[]Sample{{Labels: map[string]string{}, Value: math.Inf(-1)}}},
		{"warnings ignored", `{"status":"success","warnings":["w"],"data":{"resultType":"scalar","result":[1,"4"]}}`,
			[]Sample{{Labels: map[string]string{}, Value: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeQuery([]byte(tc.body), http.StatusOK)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeQueryNaN(t *testing.T) {
	got, err := decodeQuery([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`), http.StatusOK)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, math.IsNaN(got[0].Value))
}

func TestDecodeQueryRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"not JSON", `<html>bad gateway</html>`, http.StatusBadGateway, "HTTP 502, not a Prometheus API answer"},
		{"unknown status", `{"status":"maybe"}`, http.StatusOK, `answer status "maybe"`},
		{"success without data", `{"status":"success"}`, http.StatusOK, "without data"},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, http.StatusOK, "a matrix result"},
		{"string", `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, http.StatusOK, "a string result"},
		{"unknown type", `{"status":"success","data":{"resultType":"tensor","result":[]}}`, http.StatusOK, `unknown result type "tensor"`},
		{"value not a pair", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`, http.StatusOK, "series 0: value has 1 elements"},
		{"value not a number", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"one"]}]}}`, http.StatusOK, `value "one" is not a number`},
		{"value unquoted", `{"status":"success","data":{"resultType":"scalar","result":[1,1]}}`, http.StatusOK, "scalar result: value"},
		{"time not a number", `{"status":"success","data":{"resultType":"scalar","result":["t","1"]}}`, http.StatusOK, "value's time"},
		{"native histogram", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}}`, http.StatusOK, "no value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeQuery([]byte(tc.body), tc.status)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodeErrorAnswer(t *testing.T) {
	_, err := decodeQuery([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`), http.StatusBadRequest)
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr))
	assert.Equal(t, APIError{StatusCode: http.StatusBadRequest, Type: "bad_data", Message: "parse error"}, *apiErr)
	assert.Equal(t, "prometheus API: HTTP 400, bad_data: parse error", err.Error())
}

func TestDecodeRules(t *testing.T) {
	got, err := decodeRules([]byte(`{"status":"success","data":{"groups":[
		{"name":"g1","file":"/r.yml","rules":[
			{"name":"A","query":"up == 0","health":"ok","type":"alerting","state":"pending","alerts":[]},
			{"name":"r:x","query":"sum(up)","health":"err","lastError":"boom","type":"recording"}]},
		{"name":"g2","rules":[]}]}}`), http.StatusOK)
	require.NoError(t, err)
	assert.Equal(t, []Rule{
		{Group: "g1", Name: "A", Type: "alerting", Health: "ok", State: "pending"},
		{Group: "g1", Name: "r:x", Type: "recording", Health: "err", LastError: "boom"},
	}, got)

	_, err = decodeRules([]byte(`{"status":"success","data":{"groups":[{"name":"g","rules":[{"type":"alerting"}]}]}}`), http.StatusOK)
	assert.ErrorContains(t, err, `a rule of group "g" has no name`)
	_, err = decodeRules([]byte(`{"status":"success","data":{"groups":"x"}}`), http.StatusOK)
	assert.ErrorContains(t, err, "rules data")
}

func TestReadLimited(t *testing.T) {
	b, err := readLimited(strings.NewReader("12345"), 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = readLimited(strings.NewReader("123456"), 5)
	assert.ErrorContains(t, err, "longer than 5 bytes")
}

// The API's answers are outside input: no answer makes the decoders panic,
// and what they accept is well formed.
func FuzzDecodeQuery(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"1"]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(seed), 200)
	}
	f.Fuzz(func(t *testing.T, body []byte, status int) {
		samples, err := decodeQuery(body, status)
		if err != nil {
			assert.Nil(t, samples)
			return
		}
		for _, s := range samples {
			assert.NotNil(t, s.Labels)
		}
	})
}

func FuzzDecodeRules(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"groups":[{"name":"g","rules":[{"name":"A","type":"alerting","health":"ok","state":"firing"}]}]}}`,
		`{"status":"error","errorType":"internal","error":"x"}`,
		`{"status":"success","data":{}}`, `{}`, ``,
	} {
		f.Add([]byte(seed), 200)
	}
	f.Fuzz(func(t *testing.T, body []byte, status int) {
		rules, err := decodeRules(body, status)
		if err != nil {
			assert.Nil(t, rules)
			return
		}
		for _, r := range rules {
			assert.NotEmpty(t, r.Name)
		}
	})
}
