package binding

import (
	"context"
	"os"
	"testing"
)

// BenchmarkValidateFixture validates the deployment-policy fixture (three
// services, five entries) without and with existence checks on the store.
func BenchmarkValidateFixture(b *testing.B) {
	cat, store := loadFixtures(b)
	f, err := os.Open("testdata/deployment-policy.json")
	if err != nil {
		b.Fatal(err)
	}
	pol, err := DecodeDeploymentPolicy(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	target := pol
	checker, _ := NewStoreChecker(store.Store, testOrg)
	for _, bc := range []struct {
		name    string
		checker ExistenceChecker
	}{{"NoChecker", nil}, {"StoreChecker", checker}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Validate(context.Background(), target, Options{Resolver: cat, Checker: bc.checker}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateOpenHorizon validates anax's end-to-end deployment
// policy userdev/netspeed_secrets (five services, four bindings with
// enableNodeLevelSecrets) at the agreement point, with existence checks:
// for a node (each binding checks its node-level secret, missing, and then
// the organisation's) and without one; then resolves the report for the
// node with Report.Bindings.
func BenchmarkValidateOpenHorizon(b *testing.B) {
	store := e2eStore(b)
	cat, err := NewCatalog(e2eHub(b)...)
	if err != nil {
		b.Fatal(err)
	}
	target := ohPolicy(b, "anax/deployment_policies/netspeed_secrets.json", ohVars(b, nil))
	checker, _ := NewStoreChecker(store, orgUserdev)
	for _, bc := range []struct{ name, node string }{{"NoNode", ""}, {"Node", "an12345"}} {
		b.Run("Validate/"+bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Validate(context.Background(), target, Options{Resolver: cat, Checker: checker, Point: PointAgreement, Node: bc.node}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	rep, err := Validate(context.Background(), target, Options{Resolver: cat, Checker: checker, Point: PointAgreement, Node: "an12345"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Bindings", func(b *testing.B) {
		for b.Loop() {
			if _, err := rep.Bindings(orgUserdev, "an12345"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
