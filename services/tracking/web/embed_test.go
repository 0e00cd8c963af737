package web

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)
	first := do(t, srv.URL, http.MethodGet, nil)
	etag := first.header.Get("ETag")
	if etag == "" || etag[0] != '"' {
		t.Fatalf("ETag %q, want a quoted strong validator", etag)
	}

	cases := []struct {
		name       string
		method     string
		header     map[string]string
		wantStatus int
		wantBody   []byte
	}{
		{name: "GET serves the tracker", method: http.MethodGet, wantStatus: http.StatusOK, wantBody: Tracker},
		{name: "HEAD answers headers without a body", method: http.MethodHead, wantStatus: http.StatusOK, wantBody: []byte{}},
		{name: "matching If-None-Match is 304", method: http.MethodGet, header: map[string]string{"If-None-Match": etag}, wantStatus: http.StatusNotModified, wantBody: []byte{}},
		{name: "stale If-None-Match gets the tracker", method: http.MethodGet, header: map[string]string{"If-None-Match": `"stale"`}, wantStatus: http.StatusOK, wantBody: Tracker},
		{name: "POST is 405", method: http.MethodPost, wantStatus: http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := do(t, srv.URL, tc.method, tc.header)
			if got.status != tc.wantStatus {
				t.Fatalf("status %d, want %d", got.status, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusMethodNotAllowed {
				if a := got.header.Get("Allow"); a != "GET, HEAD" {
					t.Errorf("Allow %q", a)
				}
				return
			}
			if got.header.Get("ETag") != etag {
				t.Errorf("ETag %q, want %q", got.header.Get("ETag"), etag)
			}
			if !bytes.Equal(got.body, tc.wantBody) {
				t.Errorf("body of %d bytes, want %d", len(got.body), len(tc.wantBody))
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			want := map[string]string{
				"Content-Type":           "application/javascript; charset=utf-8",
				"Cache-Control":          "public, max-age=300",
				"X-Content-Type-Options": "nosniff",
			}
			for k, v := range want {
				if g := got.header.Get(k); g != v {
					t.Errorf("%s %q, want %q", k, g, v)
				}
			}
		})
	}
}

// The tracker must stay small enough to load on every page view without
// noticeable cost, and must be the file the package embeds.
func TestTrackerIsSmall(t *testing.T) {
	t.Parallel()
	const limit = 10 << 10
	if len(Tracker) == 0 || len(Tracker) > limit {
		t.Fatalf("svc.js is %d bytes, want 1..%d", len(Tracker), limit)
	}
	if !bytes.Contains(Tracker, []byte("svc_click_id")) {
		t.Fatal("svc.js does not name the svc_click_id cookie")
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, url, method string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, url+"/svc.js", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}
