package httpkit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
)

type ctxKey struct{}

// A client that hangs up cancels the request's context; the route's
// context stays alive (with its values), bounded by the limit.
func TestOutliveHangup(t *testing.T) {
	parent, hangUp := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	var got context.Context
	h := httpkit.OutliveHangup(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hangUp()
		got = r.Context()
		if err := got.Err(); err != nil {
			t.Errorf("route's context: %v after the client hung up", err)
		}
		if got.Value(ctxKey{}) != "v" {
			t.Error("the request's values are lost")
		}
		if dl, ok := got.Deadline(); !ok || time.Until(dl) > time.Minute {
			t.Errorf("deadline %v %v, want within the limit", dl, ok)
		}
	}), time.Minute)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(parent))
	if got.Err() == nil {
		t.Error("the route's context outlives the route")
	}
}
