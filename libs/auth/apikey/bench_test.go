package apikey_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		if _, _, _, err := apikey.Generate(false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthenticateHeader is the per-request cost of the library on
// top of the store lookup (parse + SHA-256 + map store).
func BenchmarkAuthenticateHeader(b *testing.B) {
	plain, hash, _, err := apikey.Generate(false)
	if err != nil {
		b.Fatal(err)
	}
	a := &apikey.Authenticator{Store: &memStore{keys: map[string]apikey.Key{string(hash): {ID: 1, ProgramID: 1}}}, Now: func() time.Time { return t0 }}
	header := "Bearer " + plain
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, o, _ := a.AuthenticateHeader(ctx, header); o != apikey.OutcomeOK {
			b.Fatal(o)
		}
	}
}

// BenchmarkRotationWarnings is the extra cost of answering a typical JSON
// body for a key marked for rotation.
func BenchmarkRotationWarnings(b *testing.B) {
	key := rotatingKeyValue()
	body := []byte(`{"success":true,"click_id":"cust_1717171717_42","partner_code":"summer24","cookie_window_days":60}`)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		rw := apikey.WithRotationWarnings(rec, key, t0, docsURL)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(body)
		if err := rw.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteUnauthorized(b *testing.B) {
	m := apikey.SaleMessages()
	b.ReportAllocs()
	for b.Loop() {
		apikey.WriteUnauthorized(discardWriter{h: http.Header{}}, m, apikey.OutcomeInvalid, docsURL)
	}
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (d discardWriter) WriteHeader(int)             {}
