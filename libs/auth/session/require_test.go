package session_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
)

// Require answers every refusal with its 401 and the platform envelope,
// hands a failed lookup to the service's fail, and passes the admitted
// user on.
func TestRequire(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	now := t0
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, clockAt(&now))
	v, _ := session.NewVerifier(pub, issuer, clockAt(&now))
	live, _, _ := iss.Issue(7, session.KindDashboard)
	cli, _, _ := iss.Issue(7, session.KindCLI)
	c, _ := session.NewChecker(v, session.KindDashboard, revocations{})
	down, _ := session.NewChecker(v, session.KindDashboard, revocations(nil))
	expired, _ := session.NewIssuer(priv, issuer, time.Minute, clockAt(&[]time.Time{t0.Add(-time.Hour)}[0]))
	old, _, _ := expired.Issue(7, session.KindDashboard)

	var admitted int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { admitted = session.UserID(r.Context()) })
	fail := func(_ context.Context, err error, w http.ResponseWriter) { w.WriteHeader(599) }
	tests := []struct {
		name    string
		checker *session.Checker
		header  string
		status  int
		message string
	}{
		{"no header", c, "", 401, session.MsgMissing},
		{"not bearer", c, "Basic x", 401, session.MsgMissing},
		{"empty bearer", c, "Bearer  ", 401, session.MsgInvalid},
		{"no checker", nil, "Bearer " + live, 401, session.MsgInvalid},
		{"a CLI token", c, "Bearer " + cli, 401, session.MsgInvalid},
		{"garbage", c, "Bearer abc", 401, session.MsgInvalid},
		{"expired", c, "Bearer " + old, 401, session.MsgExpired},
		{"lookup down", down, "Bearer " + live, 599, ""},
		{"live", c, "Bearer " + live, 200, ""},
	}
	for _, tt := range tests {
		admitted = 0
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		session.Require(tt.checker, fail, next).ServeHTTP(w, r)
		if w.Code != tt.status {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.status)
			continue
		}
		if tt.message != "" {
			var env struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error.Message != tt.message {
				t.Errorf("%s: %s, want %q", tt.name, w.Body, tt.message)
			}
		}
		if want := map[bool]int64{true: 7, false: 0}[tt.status == 200]; admitted != want {
			t.Errorf("%s: admitted user %d, want %d", tt.name, admitted, want)
		}
	}
}
