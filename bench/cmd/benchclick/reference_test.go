package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg/pgtest"
)

func newReference(t *testing.T) (*referenceServer, *httptest.Server) {
	t.Helper()
	ref, err := openReference(context.Background(), pgtest.NewDatabase(t), 4, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ref.Close)
	ref.now = func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	srv := httptest.NewServer(ref.handler())
	t.Cleanup(srv.Close)
	return ref, srv
}

func TestReferenceClickRecordsOneRowPerAcceptedClick(t *testing.T) {
	t.Parallel()
	ref, srv := newReference(t)
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStatus  int
		wantInBody  string
	}{
		{"via code recorded", "application/json", `{"affiliate_url":"https://b.example/?via=p01-link001","page_url":"https://b.example/","user_agent":"UA"}`, 200, `"click_id":"cust_1700000000000_`},
		{"aff code and numeric-string program id", "application/json", `{"affiliate_url":"https://b.example/x?aff=p02&utm_source=y","program_id":"7"}`, 200, `"partner_code":"p02"`},
		{"existing click id kept", "application/json; charset=utf-8", `{"affiliate_url":"https://b.example/?via=p01","existing_click_id":"cust_9_9","program_id":7}`, 200, `"click_id":"cust_9_9"`},
		{"missing affiliate_url", "application/json", `{"page_url":"https://b.example/"}`, 400, "affiliate_url is required"},
		{"no aff or via", "application/json", `{"affiliate_url":"https://b.example/?ref=x"}`, 400, "no aff or via"},
		{"unknown field", "application/json", `{"affiliate_url":"https://b.example/?via=x","surprise":1}`, 400, "Invalid JSON"},
		{"malformed JSON", "application/json", `{"affiliate_url":`, 400, "Invalid JSON"},
		{"non-numeric program id", "application/json", `{"affiliate_url":"https://b.example/?via=x","program_id":"abc"}`, 400, "Unknown program_id"},
		{"wrong content type", "text/plain", `{"affiliate_url":"https://b.example/?via=x"}`, 400, "Content-Type"},
	}
	accepted := 0
	for _, tt := range tests {
		// Sequential: the row count below depends on every case.
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/track/click", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tt.contentType)
			req.Header.Set("X-Forwarded-For", "81.2.69.160")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(b), tt.wantInBody) {
				t.Fatalf("%d %s, want %d containing %q", resp.StatusCode, b, tt.wantStatus, tt.wantInBody)
			}
			if resp.StatusCode == 200 {
				accepted++
			}
		})
	}
	n, ok, err := countRows(context.Background(), ref.pool, referenceSchema+".click_events")
	if err != nil || !ok || n != int64(accepted) {
		t.Fatalf("rows %d (table found %v, err %v), want %d", n, ok, err, accepted)
	}
	var ips, reused, withProgram int
	err = ref.pool.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE ip = '81.2.69.160'),
		count(*) FILTER (WHERE reused AND click_id = 'cust_9_9'),
		count(*) FILTER (WHERE program_id = 7)
		FROM bench_reference.click_events`).Scan(&ips, &reused, &withProgram)
	if err != nil {
		t.Fatal(err)
	}
	if ips != accepted || reused != 1 || withProgram != 2 {
		t.Fatalf("forwarded ip on %d rows, reused %d, program 7 on %d; want %d, 1, 2", ips, reused, withProgram, accepted)
	}
}

func TestCountRowsReportsAMissingTable(t *testing.T) {
	t.Parallel()
	ref, _ := newReference(t)
	if _, ok, err := countRows(context.Background(), ref.pool, "tracking.affiliate_click_events"); err != nil || ok {
		t.Fatalf("ok %v err %v, want a missing table reported without error", ok, err)
	}
}

func TestForwardedClientBelievesOnlyLoopbackPeers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, remote, xff, want string
	}{
		{"loopback proxy: last entry", "127.0.0.1:5000", "1.2.3.4, 81.2.69.160", "81.2.69.160"},
		{"loopback, no header", "127.0.0.1:5000", "", "127.0.0.1"},
		{"other peer: header ignored", "81.2.69.1:5000", "1.2.3.4", "81.2.69.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.RemoteAddr = tt.remote
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			got, ok := forwardedClient(r)
			if !ok || got.String() != tt.want {
				t.Fatalf("got %v %v, want %s", got, ok, tt.want)
			}
		})
	}
}
