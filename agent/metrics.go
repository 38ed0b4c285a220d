package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// meterName is the instrumentation scope of the Agent's instruments.
const meterName = "github.com/edgesecrets/edgesecrets/agent"

// instruments are the Agent's OpenTelemetry instruments; their attributes
// are bounded (message types, outcomes, events), never an agreement,
// instance or secret name.
type instruments struct {
	messages      metric.Int64Counter
	files         metric.Int64Counter
	registrations metric.Int64Counter
	reloads       metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	messages, err1 := m.Int64Counter("edgesecrets.agent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Messages taken from the agbots' relays by type and outcome: applied, rejected (answered with a refusal), unopened (dropped: not authentic, replayed)."))
	files, err2 := m.Int64Counter("edgesecrets.agent.files", metric.WithUnit("{file}"),
		metric.WithDescription("Secret files written (a proposal's or update's) and instances wiped (a cancellation's)."))
	registrations, err3 := m.Int64Counter("edgesecrets.agent.registrations", metric.WithUnit("{registration}"),
		metric.WithDescription("Registrations of the agent's identity again after the hub stopped renewing it, by outcome: registered, failed."))
	reloads, err4 := m.Int64Counter("edgesecrets.agent.reloads", metric.WithUnit("{reload}"),
		metric.WithDescription("Reloads of service instances after their files changed (Options.Services), by outcome: ok, failed, timeout."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("agent: metrics: %w", err)
	}
	return &instruments{messages: messages, files: files, registrations: registrations, reloads: reloads}, nil
}

// message counts one message taken from a relay, and the files it wrote
// or the instances it wiped.
func (in *instruments) message(got agentapi.Received, err error) {
	ctx := context.Background()
	typ, outcome := string(got.Header.Type), "applied"
	switch {
	case err != nil:
		typ, outcome = "unknown", "unopened"
	case got.Err != nil:
		outcome = "rejected"
	}
	if typ == "" {
		typ = "unknown"
	}
	in.messages.Add(ctx, 1, metric.WithAttributes(attribute.String("type", typ), attribute.String("outcome", outcome)))
	if err != nil || got.Err != nil {
		return
	}
	written := 0
	for _, names := range got.Changes {
		written += len(names)
	}
	if written > 0 {
		in.files.Add(ctx, int64(written), metric.WithAttributes(attribute.String("event", "written")))
	}
	if got.Kind == agreement.UpdateKindCancel && len(got.Removed) > 0 {
		in.files.Add(ctx, int64(len(got.Removed)), metric.WithAttributes(attribute.String("event", "wiped")))
	}
}

// registration counts one registration again, by outcome.
func (in *instruments) registration(err error) {
	outcome := "registered"
	if err != nil {
		outcome = "failed"
	}
	in.registrations.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// reload counts one reload, by outcome.
func (in *instruments) reload(outcome string) {
	in.reloads.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// route names a request to the services' API for the request metrics,
// from a bounded set: never a secret name.
func route(r *http.Request) string {
	p := r.URL.Path
	for _, base := range []string{"/api/v1/secrets", "/secrets"} {
		switch {
		case p == base:
			return p
		case strings.HasPrefix(p, base+"/"):
			return base + "/{name}"
		}
	}
	return "other"
}
