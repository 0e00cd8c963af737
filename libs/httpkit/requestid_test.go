package httpkit_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestIDKeepsOrReplacesIncoming(t *testing.T) {
	long128 := strings.Repeat("a", 128)
	tests := []struct {
		name     string
		incoming []string
		keep     bool
	}{
		{"absent is generated", nil, false},
		{"uuid kept", []string{"3f2504e0-4f89-11d3-9a0c-0305e82c3301"}, true},
		{"all allowed characters kept", []string{"Az09._:-"}, true},
		{"128 characters kept", []string{long128}, true},
		{"129 characters replaced", []string{long128 + "a"}, false},
		{"empty replaced", []string{""}, false},
		{"space replaced", []string{"a b"}, false},
		{"header injection replaced", []string{"a\r\nSet-Cookie: x"}, false},
		{"slash replaced", []string{"a/b"}, false},
		{"non-ascii replaced", []string{"idé"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen string
			h := httpkit.RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = httpkit.RequestIDFrom(r.Context())
				w.WriteHeader(http.StatusNoContent)
			}))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, v := range tt.incoming {
				req.Header.Set(httpkit.HeaderRequestID, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			got := rec.Header().Get(httpkit.HeaderRequestID)
			if got != seen {
				t.Errorf("response header %q differs from context id %q", got, seen)
			}
			if tt.keep {
				if got != tt.incoming[0] {
					t.Errorf("id = %q, want incoming %q kept", got, tt.incoming[0])
				}
				return
			}
			if !generatedID.MatchString(got) {
				t.Errorf("id = %q, want a generated 32-char hex id", got)
			}
		})
	}
}

func TestRequestIDGeneratedIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := httpkit.NewRequestID()
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestRequestIDHeaderOnEveryKindOfResponse(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		status  int
	}{
		{"explicit status", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }, 418},
		{"write without status", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) }, 200},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, 200},
		{"error envelope", func(w http.ResponseWriter, r *http.Request) {
			_ = httpkit.WritePlatformError(w, 500, "Click tracking failed")
		}, 500},
		{"flush before write", func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
		}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			httpkit.RequestID(tt.handler).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if !generatedID.MatchString(rec.Header().Get(httpkit.HeaderRequestID)) {
				t.Errorf("X-Request-ID = %q, want generated id", rec.Header().Get(httpkit.HeaderRequestID))
			}
		})
	}
}

func TestOmitRequestIDSuppressesHeaderForOneResponse(t *testing.T) {
	h := httpkit.RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			if !httpkit.OmitRequestID(r.Context()) {
				t.Error("OmitRequestID reported no request id state")
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	tests := []struct {
		path string
		want bool
	}{
		{"/status", false},
		{"/other", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req.Header.Set(httpkit.HeaderRequestID, "abc")
			h.ServeHTTP(rec, req)
			has := len(rec.Header().Values(httpkit.HeaderRequestID)) > 0
			if has != tt.want {
				t.Errorf("header present = %v, want %v", has, tt.want)
			}
		})
	}
}

func TestOmitRequestIDOutsideMiddlewareReportsFalse(t *testing.T) {
	if httpkit.OmitRequestID(t.Context()) {
		t.Error("OmitRequestID outside RequestID = true")
	}
	if id := httpkit.RequestIDFrom(t.Context()); id != "" {
		t.Errorf("RequestIDFrom outside RequestID = %q", id)
	}
}

// The CLI GET status route: 200, 401 and 429 carry no X-Request-ID, 500 does,
// including a 429 written by a middleware before the handler runs.
func TestOmitRequestIDWhenKeepsItOnServerErrorsOnly(t *testing.T) {
	below500 := func(s int) bool { return s < 500 }
	tests := []struct {
		name   string
		status int
		want   bool
	}{
		{"200 has none", 200, false},
		{"401 has none", 401, false},
		{"429 has none", 429, false},
		{"500 has it", 500, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tt.status) })
			h := httpkit.RequestID(httpkit.OmitRequestIDWhen(below500)(inner))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/cli/status", nil))
			has := len(rec.Header().Values(httpkit.HeaderRequestID)) > 0
			if has != tt.want {
				t.Errorf("status %d: header present = %v, want %v", tt.status, has, tt.want)
			}
		})
	}
}

func TestRequestIDWriterSupportsResponseController(t *testing.T) {
	h := httpkit.RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("a"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through ResponseController: %v", err)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if !generatedID.MatchString(resp.Header.Get(httpkit.HeaderRequestID)) {
		t.Errorf("X-Request-ID = %q", resp.Header.Get(httpkit.HeaderRequestID))
	}
}
