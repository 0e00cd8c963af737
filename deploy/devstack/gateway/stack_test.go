package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
)

// Through the real gateway in front of the real services: commissions
// answers its ledger routes under accounts' /admin/v1/partners, and
// accounts still answers the rest (both read the same ADMIN_TOKEN).
func TestAdminRoutesReachTheirOwnerThroughTheGateway(t *testing.T) {
	t.Parallel()
	st := stacktest.Start(t, nil)
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	c := &http.Client{Timeout: 30 * time.Second}
	call := func(t *testing.T, method, path string, body any) (int, json.RawMessage) {
		t.Helper()
		var in io.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			in = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, gw.URL+path, in)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+stacktest.AdminToken)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, env.Data
	}

	t.Run("the gateway's /readyz is 200 and names every running service ready", func(t *testing.T) {
		resp, err := c.Get(gw.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got gateway.Readiness
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || got.Status != "ready" || len(got.Services) != len(st.Names()) {
			t.Fatalf("%d %+v, want 200 ready with %v", resp.StatusCode, got, st.Names())
		}
		for _, name := range st.Names() {
			if s := got.Services[name]; s.Status != "ready" || s.Checks["postgres"] != "ok" {
				t.Errorf("%s: %+v, want ready with postgres ok", name, s)
			}
		}
	})

	const email = "gateway-admin@partner.example"
	status, data := call(t, http.MethodPost, "/admin/v1/partners", map[string]string{"name": "Gateway", "email": email})
	var partner struct{ ID int64 }
	if status != http.StatusCreated || json.Unmarshal(data, &partner) != nil || partner.ID == 0 {
		t.Fatalf("POST /admin/v1/partners (accounts): %d %s", status, data)
	}

	t.Run("accounts answers GET /admin/v1/partners?email=", func(t *testing.T) {
		status, data := call(t, http.MethodGet, "/admin/v1/partners?email="+url.QueryEscape(email), nil)
		var found []struct{ ID int64 }
		if status != http.StatusOK || json.Unmarshal(data, &found) != nil || len(found) != 1 || found[0].ID != partner.ID {
			t.Fatalf("%d %s, want partner %d", status, data, partner.ID)
		}
	})
	// accounts has none of these routes: a 200 with a list comes from
	// commissions' ledger (no entries yet, so empty lists).
	for _, path := range []string{
		fmt.Sprintf("/admin/v1/partners/%d/balances", partner.ID),
		fmt.Sprintf("/admin/v1/partners/%d/withdrawals", partner.ID),
		fmt.Sprintf("/admin/v1/partners/%d/notifications", partner.ID),
		"/admin/v1/advertisers/1/notifications",
	} {
		t.Run("commissions answers GET "+path, func(t *testing.T) {
			status, data := call(t, http.MethodGet, path, nil)
			if status != http.StatusOK || string(data) != "[]" {
				t.Fatalf("%d %s, want 200 {\"data\":[]} from commissions", status, data)
			}
		})
	}
	t.Run("commissions answers POST /admin/v1/commissions/approve-due", func(t *testing.T) {
		status, data := call(t, http.MethodPost, "/admin/v1/commissions/approve-due", nil)
		var out struct{ Approved *int }
		if status != http.StatusOK || json.Unmarshal(data, &out) != nil || out.Approved == nil {
			t.Fatalf("%d %s, want {approved:n}", status, data)
		}
	})
	t.Run("a near miss stays on accounts, which has no such route", func(t *testing.T) {
		status, _ := call(t, http.MethodGet, fmt.Sprintf("/admin/v1/partners/%d/balancesX", partner.ID), nil)
		if status != http.StatusNotFound {
			t.Fatalf("%d, want accounts' 404", status)
		}
	})
}
