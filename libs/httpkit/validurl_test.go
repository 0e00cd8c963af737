package httpkit_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

func TestValidURL(t *testing.T) {
	t.Parallel()
	reached := 0
	h := httpkit.ValidURL(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }), nil)
	for _, c := range []struct {
		target string
		ok     bool
	}{
		{"/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F", true},
		{"/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F%FF", false},
		{"/admin/v1/sales/%C0%AF", false},
		{"/admin/v1/sales/order%00", true}, // a NUL is the route's to name
		{"/x?%FF=1", false},
		{"/x?a=%00", true},
		{"/x?a=caf%C3%A9&b=", true},
		{"/x?a=%zz", true}, // a malformed escape is the handler's to read
		{"/café", true},
	} {
		reached = 0
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.target, nil))
		if c.ok != (reached == 1) || c.ok != (rec.Code == 200) {
			t.Errorf("%s: status %d, reached %d, want ok %v", c.target, rec.Code, reached, c.ok)
		}
		if !c.ok && (rec.Code != 400 || !strings.Contains(rec.Body.String(), httpkit.MsgInvalidURL)) {
			t.Errorf("%s: %d %s", c.target, rec.Code, rec.Body.String())
		}
	}
}

func TestValidURLTyped(t *testing.T) {
	t.Parallel()
	h := httpkit.ValidURL(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("reached") }), httpkit.TypedRefusal)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/programs/me/readiness?x=%FF", nil))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"code":"invalid_request"`) || strings.Contains(rec.Body.String(), `"data"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}
