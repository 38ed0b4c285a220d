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
	target := pol.Target()
	checker, _ := NewStoreChecker(store, testOrg)
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
