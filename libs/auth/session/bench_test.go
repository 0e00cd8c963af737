package session_test

import (
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
)

func BenchmarkIssue(b *testing.B) {
	sk, _, _ := session.GenerateKeyPair()
	priv, _ := session.ParsePrivateKey(sk)
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := iss.Issue(42, session.KindDashboard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is what every dashboard request pays instead of a call to
// accounts.
func BenchmarkVerify(b *testing.B) {
	sk, pk, _ := session.GenerateKeyPair()
	priv, pub, _ := session.ParseKeys(sk, pk)
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, nil)
	ver, _ := session.NewVerifier(pub, issuer, nil)
	tok, _, _ := iss.Issue(42, session.KindDashboard)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
