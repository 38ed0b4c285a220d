package pgtest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Outside a test (a program's integration harness, say), StartServer runs
// a server that the caller closes; tests use Start or NewDatabase instead.
// Here the database goes away for a while, as in an outage, and comes back
// with its data.
func ExampleStartServer() {
	ctx := context.Background()
	srv, err := pgtest.StartServer(ctx, pgtest.Options{})
	if errors.Is(err, pgtest.ErrUnavailable) {
		fmt.Println("no PostgreSQL:", pgtest.HowToGet)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	pool, err := pgxpool.New(ctx, srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE leases (agreement text PRIMARY KEY, owner text)"); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pool.Exec(ctx, "INSERT INTO leases VALUES ('a1', 'agbot-1')"); err != nil {
		fmt.Println(err)
		return
	}

	if err := srv.Stop(); err != nil { // the outage begins
		fmt.Println(err)
		return
	}
	_, err = pool.Exec(ctx, "SELECT 1")
	fmt.Println("while stopped:", err != nil)
	if err := srv.Start(ctx); err != nil { // and ends
		fmt.Println(err)
		return
	}
	var owner string
	if err := pool.QueryRow(ctx, "SELECT owner FROM leases WHERE agreement = 'a1'").Scan(&owner); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after the restart:", owner)
}
