package promtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// envelope is every answer of Prometheus's HTTP API.
type envelope struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// decodeEnvelope checks an answer's status and returns its data; an error
// answer is an *APIError.
func decodeEnvelope(body []byte, status int) (json.RawMessage, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("HTTP %d, not a Prometheus API answer: %w", status, err)
	}
	switch env.Status {
	case "success":
		if len(env.Data) == 0 {
			return nil, fmt.Errorf("HTTP %d: a success answer without data", status)
		}
		return env.Data, nil
	case "error":
		return nil, &APIError{StatusCode: status, Type: env.ErrorType, Message: env.Error}
	}
	return nil, fmt.Errorf("HTTP %d: answer status %q is neither success nor error", status, env.Status)
}

// decodeQuery decodes an /api/v1/query answer.
func decodeQuery(body []byte, status int) ([]Sample, error) {
	data, err := decodeEnvelope(body, status)
	if err != nil {
		return nil, err
	}
	var res struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("query data: %w", err)
	}
	switch res.ResultType {
	case "vector":
		var series []struct {
			Metric map[string]string `json:"metric"`
			Value  json.RawMessage   `json:"value"`
		}
		if err := json.Unmarshal(res.Result, &series); err != nil {
			return nil, fmt.Errorf("vector result: %w", err)
		}
		samples := make([]Sample, 0, len(series))
		for i, s := range series {
			v, err := decodeValue(s.Value)
			if err != nil {
				return nil, fmt.Errorf("vector result, series %d: %w", i, err)
			}
			labels := s.Metric
			if labels == nil {
				labels = map[string]string{}
			}
			samples = append(samples, Sample{Labels: labels, Value: v})
		}
		return samples, nil
	case "scalar":
		v, err := decodeValue(res.Result)
		if err != nil {
			return nil, fmt.Errorf("scalar result: %w", err)
		}
		return []Sample{{Labels: map[string]string{}, Value: v}}, nil
	case "matrix", "string":
		return nil, fmt.Errorf("a %s result: Query takes expressions giving an instant vector or a scalar", res.ResultType)
	}
	return nil, fmt.Errorf("unknown result type %q", res.ResultType)
}

// decodeValue decodes a sample's [<unix time>, "<value>"].
func decodeValue(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 {
		return 0, errors.New("no value (a native histogram?)")
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		return 0, fmt.Errorf("value: %w", err)
	}
	if len(pair) != 2 {
		return 0, fmt.Errorf("value has %d elements, not [time, value]", len(pair))
	}
	var ts float64
	if err := json.Unmarshal(pair[0], &ts); err != nil {
		return 0, fmt.Errorf("value's time: %w", err)
	}
	var text string
	if err := json.Unmarshal(pair[1], &text); err != nil {
		return 0, fmt.Errorf("value: %w", err)
	}
	// ParseFloat reads Prometheus's "NaN", "+Inf" and "-Inf" too.
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", text)
	}
	return v, nil
}

// decodeRules decodes an /api/v1/rules answer.
func decodeRules(body []byte, status int) ([]Rule, error) {
	data, err := decodeEnvelope(body, status)
	if err != nil {
		return nil, err
	}
	var res struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				State     string `json:"state"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("rules data: %w", err)
	}
	var rules []Rule
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			if r.Name == "" {
				return nil, fmt.Errorf("a rule of group %q has no name", g.Name)
			}
			rules = append(rules, Rule{Group: g.Name, Name: r.Name, Type: r.Type, Health: r.Health, LastError: r.LastError, State: r.State})
		}
	}
	return rules, nil
}

// readLimited reads r to its end, failing beyond max bytes.
func readLimited(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("answer longer than %d bytes", max)
	}
	return b, nil
}
