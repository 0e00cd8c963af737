package accountsclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/webhooks/internal/accountsclient"
)

// accounts stands in for accounts' route over real HTTP: one live token.
func accounts(t *testing.T, calls *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != accountsclient.Path || r.Header.Get("Authorization") != "Bearer internal" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var in struct{ Token string }
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &in)
		switch in.Token {
		case "svc_cli_live":
			_, _ = w.Write([]byte(`{"data":{"user_id":42}}`))
		case "svc_cli_broken":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestVerifyCachesBothAnswersForTheTTL(t *testing.T) {
	var calls atomic.Int64
	srv := accounts(t, &calls)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := accountsclient.New(srv.URL, "internal", srv.Client(), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if id, err := c.Verify(ctx, "svc_cli_live"); err != nil || id != 42 {
			t.Fatalf("live: %d %v", id, err)
		}
		if _, err := c.Verify(ctx, "svc_cli_gone"); !errors.Is(err, accountsclient.ErrUnknown) {
			t.Fatalf("gone: %v", err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls to accounts, want 2 (cached)", n)
	}
	now = now.Add(accountsclient.TTL)
	if _, err := c.Verify(ctx, "svc_cli_live"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls after the TTL, want 3", n)
	}
}

func TestVerifyFailureIsNotCachedNorNamesTheToken(t *testing.T) {
	var calls atomic.Int64
	srv := accounts(t, &calls)
	c, err := accountsclient.New(srv.URL, "internal", srv.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := c.Verify(context.Background(), "svc_cli_broken")
		if err == nil || errors.Is(err, accountsclient.ErrUnknown) || strings.Contains(err.Error(), "svc_cli_broken") {
			t.Fatalf("want an infrastructure error without the token: %v", err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("a failure was cached: %d calls", calls.Load())
	}
	bad, _ := accountsclient.New(srv.URL, "wrong", srv.Client(), nil)
	if _, err := bad.Verify(context.Background(), "svc_cli_live"); err == nil || errors.Is(err, accountsclient.ErrUnknown) {
		t.Fatalf("a refused internal token must not read as an unknown login token: %v", err)
	}
}
