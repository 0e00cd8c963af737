package apikey_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

const warningItem = `{"code":"api_key_rotation_required","message":"This API key is marked for rotation and stops working at 2025-02-01T00:00:00Z.","hint":"Create a new API key for this program in the dashboard, switch your integration to it before the deadline, then delete this one.","rotate_by":"2025-02-01T00:00:00Z","docs_url":"https://docs.example.com/api-keys/rotation"}`

func rotatingKeyValue() apikey.Key {
	return apikey.Key{ID: 3, ProgramID: 10, RotationMarkedAt: &marked, RotationDeadline: &deadline}
}

func TestMiddleware_RotatingKeyGetsHeadersAndWarnings(t *testing.T) {
	t.Parallel()
	a, _ := fixture(t, deadline.Add(-time.Nanosecond))
	h := a.Middleware(apikey.SaleMessages(), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := apikey.KeyFrom(r.Context())
		if !ok || k.ID != 3 {
			t.Errorf("key in context = %+v, %v", k, ok)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"success":true,"commission_id":5}`)
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil)
	req.Header.Set("Authorization", "Bearer "+rotatingKey)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d", rec.Code)
	}
	wantHeaders := map[string]string{
		"Deprecation": "@1733011200", // 2024-12-01T00:00:00Z
		"Sunset":      "Sat, 01 Feb 2025 00:00:00 GMT",
		"Link":        "<https://docs.example.com/api-keys/rotation>; rel='deprecation'",
	}
	for k, v := range wantHeaders {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	want := `{"success":true,"commission_id":5,"warnings":[` + warningItem + `]}`
	if rec.Body.String() != want {
		t.Fatalf("body\n%s\nwant\n%s", rec.Body.String(), want)
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length %s, want %d", cl, len(want))
	}
}

func TestMiddleware_UnmarkedKeyGetsNoRotationSignals(t *testing.T) {
	t.Parallel()
	a, _ := fixture(t, t0)
	h := a.Middleware(apikey.SaleMessages(), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, okBody)
	}))
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Set("Authorization", "Bearer "+validKey)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, hd := range []string{"Deprecation", "Sunset", "Link"} {
		if v := rec.Header().Get(hd); v != "" {
			t.Errorf("%s = %q on an unmarked key", hd, v)
		}
	}
	if rec.Body.String() != okBody {
		t.Errorf("body %s", rec.Body.String())
	}
}

func TestWithRotationWarnings_Bodies(t *testing.T) {
	t.Parallel()
	item := warningItem
	tests := []struct {
		name        string
		contentType string
		status      int
		body        string
		want        string
	}{
		{"wrapped payload gets warnings beside data", "application/json", 200,
			`{"data":{"programId":"7","ready":true}}`,
			`{"data":{"programId":"7","ready":true},"warnings":[` + item + `]}`},
		{"unwrapped body gets another top-level key", "application/json; charset=utf-8", 200,
			`{"success":true}`,
			`{"success":true,"warnings":[` + item + `]}`},
		{"error envelope too", "application/json", 400,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"x","details":{}}}`,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"x","details":{}},"warnings":[` + item + `]}`},
		{"empty object", "application/json", 200, `{}`, `{"warnings":[` + item + `]}`},
		{"existing warnings array appended to", "application/json", 200,
			`{"success":true,"warnings":[{"code":"other"}]}`,
			`{"success":true,"warnings":[{"code":"other"},` + item + `]}`},
		{"existing empty warnings", "application/json", 200, `{"warnings":[]}`, `{"warnings":[` + item + `]}`},
		{"trailing newline and spacing kept around members", "application/json", 200,
			"{\"a\": 1, \"b\": \"<x>&\"}\n", "{\"a\":1,\"b\":\"<x>&\",\"warnings\":[" + item + "]}\n"},
		{"number precision kept", "application/json", 200,
			`{"n":12345678901234567890.123}`, `{"n":12345678901234567890.123,"warnings":[` + item + `]}`},
		{"problem+json counts as JSON", "application/problem+json", 200, `{"a":1}`, `{"a":1,"warnings":[` + item + `]}`},
		{"array body untouched", "application/json", 200, `[1,2]`, `[1,2]`},
		{"invalid JSON untouched", "application/json", 200, `{"a":`, `{"a":`},
		{"plain text untouched", "text/plain", 200, `{"a":1}`, `{"a":1}`},
		{"no content type untouched", "", 200, `{"a":1}`, `{"a":1}`},
		{"no content untouched", "application/json", 204, ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			rw := apikey.WithRotationWarnings(rec, rotatingKeyValue(), t0, docsURL)
			if tt.contentType != "" {
				rw.Header().Set("Content-Type", tt.contentType)
			}
			rw.Header().Set("Content-Length", strconv.Itoa(len(tt.body)))
			rw.WriteHeader(tt.status)
			// Two writes, to check buffering joins them.
			half := len(tt.body) / 2
			_, _ = rw.Write([]byte(tt.body[:half]))
			_, _ = rw.Write([]byte(tt.body[half:]))
			if err := rw.Finish(); err != nil {
				t.Fatal(err)
			}
			if err := rw.Finish(); err != nil { // idempotent
				t.Fatal(err)
			}
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			if rec.Body.String() != tt.want {
				t.Fatalf("body\n%s\nwant\n%s", rec.Body.String(), tt.want)
			}
			if tt.status != 204 {
				if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(tt.want)) {
					t.Errorf("Content-Length %s, want %d", cl, len(tt.want))
				}
			}
			if tt.want != tt.body {
				var v map[string]json.RawMessage
				if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
					t.Fatalf("amended body is not JSON: %v", err)
				}
			}
		})
	}
}

func TestWithRotationWarnings_ImplicitStatusAndWriteOnly(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rw := apikey.WithRotationWarnings(rec, rotatingKeyValue(), t0, docsURL)
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write([]byte(`{"success":true}`))
	if rec.Body.Len() != 0 {
		t.Fatal("body written before Finish")
	}
	if err := rw.Finish(); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"warnings":[`) {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

func TestWithRotationWarnings_FlushStreamsUnchanged(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rw := apikey.WithRotationWarnings(rec, rotatingKeyValue(), t0, docsURL)
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write([]byte(`{"a":`))
	rw.Flush()
	_, _ = rw.Write([]byte(`1}`))
	if err := rw.Finish(); err != nil {
		t.Fatal(err)
	}
	if rec.Body.String() != `{"a":1}` || !rec.Flushed {
		t.Fatalf("body %q flushed %v", rec.Body.String(), rec.Flushed)
	}
	if rec.Header().Get("Sunset") == "" {
		t.Error("rotation headers lost when streaming")
	}
}

func TestWithRotationWarnings_LargeBodyPassesThrough(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rw := apikey.WithRotationWarnings(rec, rotatingKeyValue(), t0, docsURL)
	rw.Header().Set("Content-Type", "application/json")
	big := `{"blob":"` + strings.Repeat("x", 2<<20) + `"}`
	for chunk := range slicesOf([]byte(big), 64<<10) {
		if _, err := rw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Finish(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), []byte(big)) {
		t.Fatal("large body changed")
	}
}

func slicesOf(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			m := min(n, len(b))
			if !yield(b[:m]) {
				return
			}
			b = b[m:]
		}
	}
}

func TestWithRotationWarnings_NotRotatingLeavesResponseAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  apikey.Key
		now  time.Time
	}{
		{"unmarked key", apikey.Key{ID: 1}, t0},
		{"retired key", rotatingKeyValue(), deadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			rw := apikey.WithRotationWarnings(rec, tt.key, tt.now, docsURL)
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(okBody))
			if err := rw.Finish(); err != nil {
				t.Fatal(err)
			}
			if rec.Body.String() != okBody || rec.Header().Get("Sunset") != "" {
				t.Fatalf("response changed: %v %s", rec.Header(), rec.Body.String())
			}
		})
	}
}

func TestRotationHeaders_WithoutMarkTimeOmitsDeprecation(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	apikey.RotationHeaders(h, apikey.Key{RotationDeadline: &deadline}, docsURL)
	if h.Get("Deprecation") != "" || h.Get("Sunset") == "" || h.Get("Link") == "" {
		t.Fatalf("headers %v", h)
	}
}

// Over a real server, so Content-Length and the wire body agree.
func TestMiddleware_RotationOverTheWire(t *testing.T) {
	t.Parallel()
	a, _ := fixture(t, t0)
	srv := httptest.NewServer(a.Middleware(apikey.SaleMessages(), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(okBody)))
		_, _ = io.WriteString(w, okBody)
	})))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+rotatingKey)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"success":true,"warnings":[` + warningItem + `]}`
	if string(body) != want || resp.ContentLength != int64(len(want)) {
		t.Fatalf("got %d bytes (Content-Length %d): %s", len(body), resp.ContentLength, body)
	}
}
