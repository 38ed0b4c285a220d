// Package httpmetrics counts and times the requests an HTTP handler
// serves, as OpenTelemetry's semantic conventions name them
// (http.server.request.duration with http.request.method, http.route and
// http.response.status_code), with a route from a bounded set the caller
// chooses, never the request's path.
package httpmetrics

import (
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Options configure Wrap.
type Options struct {
	// MeterProvider gives the instrument; nil: the global provider.
	MeterProvider metric.MeterProvider
	// Scope is the instrumentation scope (the wrapping package's path).
	Scope string
	// Route names the request's route from a bounded set, such as
	// "/secrets/{name}"; it must not return anything the caller chose
	// (a name, an id), so that the label stays bounded.
	Route func(*http.Request) string
}

// Wrap returns h, timing each request on the http.server.request.duration
// histogram.
func Wrap(h http.Handler, opts Options) (http.Handler, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	dur, err := mp.Meter(opts.Scope).Float64Histogram("http.server.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	if err != nil {
		return nil, fmt.Errorf("http metrics: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		dur.Record(r.Context(), time.Since(start).Seconds(), metric.WithAttributes(
			attribute.String("http.request.method", method(r.Method)),
			attribute.String("http.route", opts.Route(r)),
			attribute.Int("http.response.status_code", rec.status),
		))
	}), nil
}

// method bounds the method attribute: a method other than the common
// ones is "_OTHER", as the conventions say.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "_OTHER"
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
