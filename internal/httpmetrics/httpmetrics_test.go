package httpmetrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets/internal/httpmetrics"
)

// Each request is one sample with its method, the bounded route and the
// status the handler wrote (200 when it wrote none); odd methods are
// "_OTHER".
func TestRequestsAreTimedByRouteAndStatus(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/secrets/missing" {
			http.NotFound(w, r)
		}
	})
	h, err := httpmetrics.Wrap(inner, httpmetrics.Options{MeterProvider: mp, Scope: "test",
		Route: func(*http.Request) string { return "/secrets/{name}" }})
	require.NoError(t, err)
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/secrets/db"}, {http.MethodGet, "/secrets/missing"}, {"BREW", "/secrets/db"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	hist := rm.ScopeMetrics[0].Metrics[0]
	assert.Equal(t, "http.server.request.duration", hist.Name)
	got := map[string]uint64{}
	for _, p := range hist.Data.(metricdata.Histogram[float64]).DataPoints {
		m, _ := p.Attributes.Value("http.request.method")
		s, _ := p.Attributes.Value("http.response.status_code")
		r, _ := p.Attributes.Value("http.route")
		assert.Equal(t, "/secrets/{name}", r.AsString())
		got[m.AsString()+" "+s.String()] = p.Count
	}
	assert.Equal(t, map[string]uint64{"GET 200": 1, "GET 404": 1, "_OTHER 200": 1}, got)
}
