package agreement_test

import (
	"context"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// transportFunc adapts a function to agreement.Transport. A real agbot
// uses a SealingTransport, which seals each update to the agent's keys.
type transportFunc func(context.Context, agreement.Delivery) (agreement.Reply, error)

func (f transportFunc) Deliver(ctx context.Context, d agreement.Delivery) (agreement.Reply, error) {
	return f(ctx, d)
}

// The agbot side of rotation: a watcher polls the store, the tracker turns
// a changed secret into updates for the agreements that use it, and the
// outbox delivers them.
func ExampleTracker() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	write := func(value string) {
		_, err := store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte(value)}}, secretstore.PutOptions{})
		if err != nil {
			panic(err)
		}
	}
	write("first")

	reader := secretstore.NewReader(store, secretstore.ReaderOptions{TTL: time.Minute})
	watcher, err := secretstore.NewWatcher(store, secretstore.WatcherOptions{})
	if err != nil {
		panic(err)
	}
	delivered := make(chan agreement.Update, 1)
	agent := transportFunc(func(_ context.Context, d agreement.Delivery) (agreement.Reply, error) {
		delivered <- d.Update
		return agreement.Reply{Version: agreement.MessageVersion, AgreementID: d.Update.AgreementID, Accepted: true}, nil
	})
	outbox, err := agreement.NewOutbox(ctx, agent, agreement.OutboxOptions{})
	if err != nil {
		panic(err)
	}
	go outbox.Run(ctx)
	tracker, err := agreement.NewTracker(agreement.TrackerOptions{
		Reader: reader, Watcher: watcher, Outbox: outbox,
		Cancel: func(_ context.Context, id string, r agreement.Revocation) {
			fmt.Println("cancel", id, "because", r.VaultSecret, r.Kind)
		},
	})
	if err != nil {
		panic(err)
	}
	defer tracker.Close()

	// The agbot reads the bound secret into the proposal it seals, and once
	// the agent accepts, registers the agreement with the tag of that
	// content, which ReadProposal put in the bindings it returned.
	_, sent, err := agreement.ReadProposal(ctx, reader, "agreement-1", []agreement.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "web"},
		Secrets: map[string]agreement.BoundSecret{"db": {VaultSecret: "myorg/db"}},
	}})
	if err != nil {
		panic(err)
	}
	if err := tracker.Register("agreement-1", sent); err != nil {
		panic(err)
	}

	// Rotated before the watcher's first look: the tracker still knows the
	// agent holds the old content.
	write("rotated")
	// A program runs the watcher (watcher.Run) and hands each cycle's
	// events to tracker.HandleEvents. Here, one cycle:
	tracker.HandleEvents(ctx, watcher.Poll(ctx).Events)

	u := <-delivered
	su, err := u.Secrets()
	if err != nil {
		panic(err)
	}
	fmt.Println(u.AgreementID, u.Kind, su.Services[0].Service.URL, su.Services[0].SecretNames())
	fmt.Println(u) // prints no secret values

	if err := store.Delete(ctx, "myorg/db"); err != nil {
		panic(err)
	}
	tracker.HandleEvents(ctx, watcher.Poll(ctx).Events)
	// Output:
	// agreement-1 secrets web [db]
	// {Version:1 AgreementID:agreement-1 Kind:secrets Payload:[108 bytes]}
	// cancel agreement-1 because myorg/db deleted
}
