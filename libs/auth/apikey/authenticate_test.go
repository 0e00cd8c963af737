package apikey_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

// memStore is a Store over a map, keyed by hash.
type memStore struct {
	mu   sync.Mutex
	keys map[string]apikey.Key
	err  error
}

func (s *memStore) LookupKeyByHash(_ context.Context, hash []byte) (apikey.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return apikey.Key{}, s.err
	}
	k, ok := s.keys[string(hash)]
	if !ok {
		return apikey.Key{}, fmt.Errorf("select api key: %w", apikey.ErrKeyNotFound)
	}
	return k, nil
}

var (
	t0       = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	marked   = time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC)
	deadline = time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)
)

const (
	docsURL     = "https://docs.example.com/api-keys/rotation"
	validKey    = "svc_live_valid"
	revokedKey  = "svc_live_revoked"
	rotatingKey = "svc_live_rotating"
	testKey     = "svc_test_valid"
)

func fixture(t *testing.T, now time.Time) (*apikey.Authenticator, *memStore) {
	t.Helper()
	store := &memStore{keys: map[string]apikey.Key{
		string(apikey.Hash(validKey)):    {ID: 1, ProgramID: 10},
		string(apikey.Hash(revokedKey)):  {ID: 2, ProgramID: 10, Revoked: true},
		string(apikey.Hash(rotatingKey)): {ID: 3, ProgramID: 10, RotationMarkedAt: &marked, RotationDeadline: &deadline},
		string(apikey.Hash(testKey)):     {ID: 4, ProgramID: 11, Test: true},
	}}
	return &apikey.Authenticator{Store: store, Now: func() time.Time { return now }, DocsURL: docsURL}, store
}

func TestAuthenticate_Outcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		header  string
		now     time.Time
		want    apikey.Outcome
		wantKey int64
	}{
		{"no header is missing", "", t0, apikey.OutcomeMissing, 0},
		{"basic scheme is malformed", "Basic eDp5", t0, apikey.OutcomeMalformed, 0},
		{"a lower-case scheme is malformed", "bearer " + validKey, t0, apikey.OutcomeMalformed, 0},
		{"empty token", "Bearer ", t0, apikey.OutcomeEmpty, 0},
		{"unknown token is invalid", "Bearer svc_live_nope", t0, apikey.OutcomeInvalid, 0},
		{"overlong token is invalid", "Bearer " + strings.Repeat("a", 10000), t0, apikey.OutcomeInvalid, 0},
		{"revoked key is invalid", "Bearer " + revokedKey, t0, apikey.OutcomeInvalid, 0},
		{"valid key", "Bearer " + validKey, t0, apikey.OutcomeOK, 1},
		{"test key", "Bearer " + testKey, t0, apikey.OutcomeOK, 4},
		{"marked key before deadline is rotating", "Bearer " + rotatingKey, deadline.Add(-time.Nanosecond), apikey.OutcomeRotating, 3},
		{"marked key exactly at deadline is retired", "Bearer " + rotatingKey, deadline, apikey.OutcomeRetired, 3},
		{"marked key after deadline is retired", "Bearer " + rotatingKey, deadline.Add(time.Hour), apikey.OutcomeRetired, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := fixture(t, tt.now)
			k, got, err := a.AuthenticateHeader(context.Background(), tt.header)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || k.ID != tt.wantKey {
				t.Errorf("got %v key %d, want %v key %d", got, k.ID, tt.want, tt.wantKey)
			}
		})
	}
}

func TestAuthenticate_StoreFailureIsNotA401(t *testing.T) {
	t.Parallel()
	a, store := fixture(t, t0)
	store.err = errors.New("connection refused")
	_, got, err := a.AuthenticateHeader(context.Background(), "Bearer "+validKey)
	if got != apikey.OutcomeError || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %v, %v; want OutcomeError with the store error", got, err)
	}

	var onErr error
	h := a.Middleware(apikey.SaleMessages(), func(w http.ResponseWriter, _ *http.Request, err error) {
		onErr = err
		w.WriteHeader(http.StatusInternalServerError)
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler reached") }))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil)
	req.Header.Set("Authorization", "Bearer "+validKey)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || onErr == nil {
		t.Fatalf("status %d onError %v", rec.Code, onErr)
	}
}

func TestAuthenticate_OnLookupReportsEveryStoreLookupOnly(t *testing.T) {
	t.Parallel()
	a, store := fixture(t, t0)
	var got []string
	a.OnLookup = func(o apikey.Outcome) { got = append(got, o.String()) }
	for _, h := range []string{"", "Basic eDp5", "Bearer ", "Bearer " + strings.Repeat("a", 300),
		"Bearer svc_live_nope", "Bearer " + revokedKey, "Bearer " + validKey, "Bearer " + rotatingKey} {
		_, _, _ = a.AuthenticateHeader(context.Background(), h)
	}
	store.err = errors.New("connection refused")
	_, _, _ = a.AuthenticateHeader(context.Background(), "Bearer "+validKey)
	if want := "invalid,invalid,ok,rotating,error"; strings.Join(got, ",") != want {
		t.Fatalf("lookups %v, want %s (none for missing, empty or overlong tokens)", got, want)
	}
}

const (
	platformMissing = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing or malformed Authorization header. Expected: Bearer <token>","details":{},"code":"unauthorized"}}`
	platformEmpty   = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing API token","details":{},"code":"unauthorized"}}`
	platformInvalid = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Invalid API token","details":{},"code":"unauthorized"}}`
	cliMissing      = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing or malformed Authorization header. Expected: Bearer <token>","details":{}}}`
	cliEmpty        = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing API token","details":{}}}`
	cliInvalid      = `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Invalid API token","details":{}}}`
	readyMissing    = `{"error":{"code":"invalid_key","message":"Missing or malformed Authorization header. Expected: Bearer <api_token>."}}`
	readyEmpty      = `{"error":{"code":"invalid_key","message":"Missing API token."}}`
	readyInvalid    = `{"error":{"code":"invalid_key","message":"Invalid API token."}}`
	retired         = `{"error":{"code":"api_key_rotation_required","message":"This API key is past its rotation deadline and no longer works.","hint":"Create a new API key for this program in the dashboard and use it instead of this one.","docs_url":"https://docs.example.com/api-keys/rotation"}}`
	okBody          = `{"success":true}`
	browserBody     = `{"success":true,"mode":"browser"}`
)

func TestMiddleware_FamilyAnswers(t *testing.T) {
	t.Parallel()
	type row struct {
		header     string
		wantStatus int
		wantBody   string
	}
	families := []struct {
		name string
		m    apikey.Messages
		rows map[string]row
	}{
		{"sale", apikey.SaleMessages(), map[string]row{
			"missing":   {"", 401, platformMissing},
			"malformed": {"Token " + validKey, 401, platformMissing},
			"lowercase": {"bearer " + validKey, 401, platformMissing},
			"empty":     {"Bearer ", 401, platformEmpty},
			"invalid":   {"Bearer svc_live_nope", 401, platformInvalid},
			"revoked":   {"Bearer " + revokedKey, 401, platformInvalid},
			"retired":   {"Bearer " + rotatingKey, 401, retired},
			"valid":     {"Bearer " + validKey, 200, okBody},
		}},
		{"refund", apikey.RefundMessages(), map[string]row{
			"missing":   {"", 401, platformMissing},
			"malformed": {"Token " + validKey, 401, platformMissing},
			"empty":     {"Bearer ", 401, platformInvalid},
			"invalid":   {"Bearer svc_live_nope", 401, platformInvalid},
			"retired":   {"Bearer " + rotatingKey, 401, retired},
			"valid":     {"Bearer " + validKey, 200, okBody},
		}},
		{"readiness", apikey.ReadinessMessages(), map[string]row{
			"missing":   {"", 401, readyMissing},
			"malformed": {"Token " + validKey, 401, readyMissing},
			"empty":     {"Bearer ", 401, readyEmpty},
			"invalid":   {"Bearer svc_live_nope", 401, readyInvalid},
			"retired":   {"Bearer " + rotatingKey, 401, retired},
			"valid":     {"Bearer " + validKey, 200, okBody},
		}},
		{"cli status and test-event", apikey.CLIMessages(), map[string]row{
			"missing":   {"", 401, cliMissing},
			"malformed": {"Token " + validKey, 401, cliMissing},
			"empty":     {"Bearer ", 401, cliEmpty},
			"invalid":   {"Bearer svc_live_nope", 401, cliInvalid},
			"retired":   {"Bearer " + rotatingKey, 401, retired},
			"valid":     {"Bearer " + validKey, 200, okBody},
		}},
		{"lead", apikey.LeadMessages(), map[string]row{
			"missing is browser mode": {"", 200, browserBody},
			// Authentication rule 3: only a missing header or an empty
			// token is browser mode.
			"malformed":             {"Token x", 401, cliMissing},
			"empty is browser mode": {"Bearer ", 200, browserBody},
			"invalid":               {"Bearer svc_live_nope", 401, cliInvalid},
			"revoked":               {"Bearer " + revokedKey, 401, cliInvalid},
			"retired":               {"Bearer " + rotatingKey, 401, retired},
			"valid is server mode":  {"Bearer " + validKey, 200, okBody},
		}},
	}
	for _, fam := range families {
		for name, r := range fam.rows {
			t.Run(fam.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				// After the deadline, so the marked key is retired.
				a, _ := fixture(t, deadline)
				h := a.Middleware(fam.m, func(w http.ResponseWriter, _ *http.Request, err error) {
					t.Errorf("onError: %v", err)
				})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					if k, ok := apikey.KeyFrom(r.Context()); ok && k.ID == 1 {
						_, _ = io.WriteString(w, okBody)
						return
					}
					_, _ = io.WriteString(w, browserBody)
				}))
				req := httptest.NewRequest(http.MethodPost, "/x", nil)
				if r.header != "" {
					req.Header.Set("Authorization", r.header)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != r.wantStatus || rec.Body.String() != r.wantBody {
					t.Fatalf("got %d %s\nwant %d %s", rec.Code, rec.Body.String(), r.wantStatus, r.wantBody)
				}
				if r.wantStatus == 401 {
					if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
						t.Errorf("Content-Type %q", ct)
					}
					if wa := rec.Header().Get("WWW-Authenticate"); wa != "Bearer" {
						t.Errorf("WWW-Authenticate %q", wa)
					}
				}
			})
		}
	}
}

// Over a real server: net/http trims the trailing space of "Bearer ", which
// must still read as an empty token.
func TestMiddleware_EmptyTokenOverTheWire(t *testing.T) {
	t.Parallel()
	a, _ := fixture(t, t0)
	srv := httptest.NewServer(a.Middleware(apikey.SaleMessages(), nil)(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer ")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 401 || string(body) != platformEmpty {
		t.Fatalf("got %d %s, want 401 %s", resp.StatusCode, body, platformEmpty)
	}
	if resp.ContentLength != int64(len(platformEmpty)) {
		t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(platformEmpty))
	}
}

func TestWriteUnauthorized_RetiredIgnoresFamily(t *testing.T) {
	t.Parallel()
	for _, m := range []apikey.Messages{apikey.SaleMessages(), apikey.RefundMessages(), apikey.ReadinessMessages(), apikey.CLIMessages(), apikey.LeadMessages()} {
		rec := httptest.NewRecorder()
		apikey.WriteUnauthorized(rec, m, apikey.OutcomeRetired, docsURL)
		if rec.Code != 401 || rec.Body.String() != retired {
			t.Errorf("%+v: got %d %s", m, rec.Code, rec.Body.String())
		}
	}
}

func TestMessages_Rejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		o          apikey.Outcome
		sale, lead bool
	}{
		{apikey.OutcomeMissing, true, false},
		{apikey.OutcomeMalformed, true, true},
		{apikey.OutcomeEmpty, true, false},
		{apikey.OutcomeInvalid, true, true},
		{apikey.OutcomeRetired, true, true},
		{apikey.OutcomeRotating, false, false},
		{apikey.OutcomeOK, false, false},
		{apikey.OutcomeError, false, false},
	}
	for _, tt := range tests {
		if got := apikey.SaleMessages().Rejects(tt.o); got != tt.sale {
			t.Errorf("sale Rejects(%v) = %v", tt.o, got)
		}
		if got := apikey.LeadMessages().Rejects(tt.o); got != tt.lead {
			t.Errorf("lead Rejects(%v) = %v", tt.o, got)
		}
	}
}
