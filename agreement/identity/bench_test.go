package identity

import (
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"testing"
)

// Hub-side costs, side by side: go test -bench . -benchmem -run '^$' ./agreement/identity/

func BenchmarkRegister(b *testing.B) {
	h := newHub(b)
	k := newAgentKeys(b)
	ctx := context.Background()
	for b.Loop() {
		// Every request is new (a proof is accepted once); making it is the
		// agent's cost, not the hub's.
		b.StopTimer()
		req := registerRequest(b, k, testID, "good", now())
		b.StartTimer()
		if _, err := h.Issuer.register(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefresh presents the previous serial each time (allowed, and the
// record keeps it as previous), so every iteration does the full hub work.
func BenchmarkRefresh(b *testing.B) {
	h := newHub(b)
	k := newAgentKeys(b)
	a := h.register(b, k, testID)
	ctx := context.Background()
	if _, err := h.refresh(ctx, testID, refreshRequest(b, k, testID, a, now())); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		req := refreshRequest(b, k, testID, a, now())
		b.StartTimer()
		if _, err := h.refresh(ctx, testID, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is what the agbot pays per seal, per KEM of the agent's
// key.
func BenchmarkVerify(b *testing.B) {
	for _, tc := range []struct {
		name string
		kem  hpke.KEM
	}{{"MLKEM768X25519", hpke.MLKEM768X25519()}, {"DHKEM-X25519", hpke.DHKEM(ecdh.X25519())}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHub(b)
			k := newAgentKeys(b)
			enc, err := tc.kem.GenerateKey()
			if err != nil {
				b.Fatal(err)
			}
			k.enc = enc
			leaf := leafOf(b, h.register(b, k, testID))
			v := h.Verifier()
			ctx := context.Background()
			for b.Loop() {
				if _, err := v.verify(ctx, leaf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseCSR(b *testing.B) {
	csr := []byte(newAgentKeys(b).csr(b, testID))
	for b.Loop() {
		if _, err := parseCSR(csr); err != nil {
			b.Fatal(err)
		}
	}
}
