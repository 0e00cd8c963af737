package server_test

import (
	"context"
	"testing"
)

func (s *stack) lead(body map[string]any, headers ...string) reply {
	s.t.Helper()
	return s.call("POST", "/api/v1/track/lead", jsonBody(body), headers...)
}

func (s *stack) status(clickID string) (status string, key *string, leads int) {
	s.t.Helper()
	if err := s.pool.QueryRow(context.Background(), `SELECT c.status, c.customer_key,
			(SELECT count(*) FROM lead_events l WHERE l.customer_id = c.id AND NOT l.is_test)
		FROM customers c WHERE c.click_id = $1`, clickID).Scan(&status, &key, &leads); err != nil {
		s.t.Fatal(err)
	}
	return status, key, leads
}

func wantSettled(t *testing.T, r reply) {
	t.Helper()
	if r.status != 200 || r.body["success"] != true || r.body["message"] == nil {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if _, ok := r.body["provisional"]; ok {
		t.Fatalf("settled lead must not say provisional: %s", r.raw)
	}
}

func wantProvisional(t *testing.T, r reply) {
	t.Helper()
	if r.status != 200 || r.body["success"] != true || r.body["provisional"] != true || r.body["message"] == nil {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

// Customer status table, lead rows.
func TestLeadCustomerRows(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }

	t.Run("click to lead with the program key: settles, saves customer_key, counts the partner", func(t *testing.T) {
		cid := s.click(f.codeA2, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "k-1", "email": "A@B.example"}, bearer(f.keyServer)...))
		st, key, leads := s.status(cid)
		if st != "lead" || key == nil || *key != "k-1" || leads != 1 {
			t.Fatalf("status %s key %v leads %d", st, key, leads)
		}
		if n := s.count(`SELECT count(*) FROM customers WHERE click_id = $1 AND signup_date IS NOT NULL AND email_hash IS NOT NULL AND email_hash <> 'A@B.example'`, cid); n != 1 {
			t.Fatal("signup date or hashed email not stored")
		}
		if n := s.count(`SELECT leads FROM partner_program_metrics WHERE program_id = $1 AND partner_id = $2`, f.progServer, f.partner2); n != 1 {
			t.Fatalf("partner leads %d", n)
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.lead.recorded'`); n < 1 {
			t.Fatal("no lead event published")
		}
		// Once saved, the customer_key alone finds the customer (server mode).
		wantPlatformError(t, s.lead(map[string]any{"customer_key": "k-1"}, bearer(f.keyServer)...), 400, "BadRequestError",
			"Customer status cannot be updated to lead. Current status: lead")
	})

	t.Run("click to lead without key on browser_allowed: settles directly; a repeat is refused", func(t *testing.T) {
		cid := s.click(f.codeB, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "b-1", "program_id": f.progBrowser}, "Origin", f.origin))
		if st, key, _ := s.status(cid); st != "lead" || key == nil || *key != "b-1" {
			t.Fatalf("status %s key %v", st, key)
		}
		before := s.rows()
		wantPlatformError(t, s.lead(map[string]any{"click_id": cid}), 400, "BadRequestError", "Customer status cannot be updated to lead. Current status: lead")
		if after := s.rows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
	})

	t.Run("click to lead without key on server_required: provisional, nothing settled; repeat records nothing", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		metrics := s.count(`SELECT COALESCE(sum(leads), 0) FROM partner_program_metrics`)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid, "customer_key": "p-1"}))
		st, key, leads := s.status(cid)
		if st != "click" || key != nil || leads != 1 {
			t.Fatalf("status %s key %v leads %d: provisional must not settle or save the key", st, key, leads)
		}
		if n := s.count(`SELECT COALESCE(sum(leads), 0) FROM partner_program_metrics`); n != metrics {
			t.Fatal("provisional lead counted in partner metrics")
		}
		before := s.rows()
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		if after := s.rows(); after != before {
			t.Fatalf("repeat wrote rows: %v -> %v", before, after)
		}

		t.Run("provisional lead then Bearer lead: settles", func(t *testing.T) {
			wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "p-1"}, bearer(f.keyServer)...))
			st, key, leads := s.status(cid)
			if st != "lead" || key == nil || *key != "p-1" || leads != 1 {
				t.Fatalf("status %s key %v leads %d", st, key, leads)
			}
		})
	})

	// The rows driven by a payment (provisional lead + sale, then a Bearer
	// lead; lead to conversion; conversion, then a lead) are in
	// attribution_test.go, through the internal attributions route the
	// commissions service's sale route asks.

	t.Run("empty token after Bearer is browser mode", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}, "Authorization", "Bearer "))
	})
}

// Track lead error table: every row, and nothing written.
func TestLeadErrors(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	cidServer := s.click(f.codeA, nil)
	cidBrowser := s.click(f.codeB, nil)
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	cases := []struct {
		name    string
		body    map[string]any
		headers []string
		status  int
		errName string
		msg     string
	}{
		{"neither click_id nor customer_key (server)", map[string]any{"email": "a@b.example"}, bearer(f.keyServer), 400, "BadRequestError", "click_id or customer_key is required"},
		{"neither click_id nor customer_key (browser)", map[string]any{}, nil, 400, "BadRequestError", "click_id or customer_key is required"},
		{"browser mode with customer_key only", map[string]any{"customer_key": "x"}, nil, 400, "BadRequestError", "click_id is required when no API key is sent"},
		{"first lead with only customer_key", map[string]any{"customer_key": "never-saved"}, bearer(f.keyServer), 400, "BadRequestError", "Customer not found. Provide a valid click_id or customer_key."},
		{"unknown click_id", map[string]any{"click_id": "cust_1_2"}, nil, 400, "BadRequestError", "Customer not found. Provide a valid click_id or customer_key."},
		{"browser mode customer not in sent program_id", map[string]any{"click_id": cidServer, "program_id": f.progBrowser}, nil, 400, "BadRequestError", "Customer not found. Provide a valid click_id or customer_key."},
		{"server mode customer of another program", map[string]any{"click_id": cidBrowser}, bearer(f.keyServer), 400, "BadRequestError", "Customer does not belong to this program"},
		{"token matching no program", map[string]any{"click_id": cidServer}, bearer("svc_live_nope"), 401, "UnauthorizedError", "Invalid API token"},
		// Authentication rule 3: a header that does not start with
		// "Bearer " is a 401; only a missing header or an empty token is
		// browser mode.
		{"a header not starting with Bearer", map[string]any{"click_id": cidBrowser}, []string{"Authorization", "Basic " + f.keyServer}, 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <token>"},
		{"a lower-case bearer", map[string]any{"click_id": cidBrowser}, []string{"Authorization", "bearer " + f.keyServer}, 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <token>"},
		{"test mode key and program_id differ", map[string]any{"additional_data": map[string]any{"test_mode": true, "program_id": f.progBrowser}}, bearer(f.keyServer), 403, "ForbiddenError", "program_id does not match the API key"},
		{"browser lead from a disallowed origin", map[string]any{"click_id": cidBrowser}, []string{"Origin", "https://evil.example"}, 403, "ForbiddenError", "Origin is not allowed for this program"},
		{"click_id wrong type", map[string]any{"click_id": 7}, nil, 400, "BadRequestError", "click_id must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.rows()
			wantPlatformError(t, s.lead(tc.body, tc.headers...), tc.status, tc.errName, tc.msg)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
		})
	}

	t.Run("retired key: 401 api_key_rotation_required", func(t *testing.T) {
		before := s.rows()
		r := s.lead(map[string]any{"click_id": cidServer}, bearer(f.keyRetired)...)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 401 || e["code"] != "api_key_rotation_required" || e["hint"] == nil || e["docs_url"] == nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if _, has := r.body["data"]; has {
			t.Fatal("typed envelope has no data key")
		}
		if after := s.rows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
	})

	t.Run("500 Lead tracking failed", func(t *testing.T) {
		ctx := context.Background()
		if _, err := s.pool.Exec(ctx, `ALTER TABLE lead_events RENAME TO lead_events_away`); err != nil {
			t.Fatal(err)
		}
		r := s.lead(map[string]any{"click_id": cidBrowser})
		if _, err := s.pool.Exec(ctx, `ALTER TABLE lead_events_away RENAME TO lead_events`); err != nil {
			t.Fatal(err)
		}
		wantPlatformError(t, r, 500, "InternalServerError", "Lead tracking failed")
		if st, _, _ := s.status(cidBrowser); st != "click" {
			t.Fatalf("a failed lead changed the status to %s", st)
		}
	})
}

func TestLeadTestMode(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	t.Run("with the program key: counts for verification", func(t *testing.T) {
		r := s.lead(map[string]any{"additional_data": map[string]any{"test_mode": true, "event_name": "signup"}}, "Authorization", "Bearer "+f.keyTest)
		d, _ := r.body["data"].(map[string]any)
		if r.status != 200 || d["test_mode"] != true || d["programId"] != float64(f.progServer) || d["eventId"] == nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE is_test AND via_api_key AND program_id = $1`, f.progServer); n != 1 {
			t.Fatal("test lead not stored with the key")
		}
	})
	t.Run("without a key: stored against additional_data.program_id, not counted for verification", func(t *testing.T) {
		r := s.lead(map[string]any{"additional_data": map[string]any{"test_mode": true, "program_id": f.progBrowser}})
		if r.status != 200 || r.body["data"].(map[string]any)["programId"] != float64(f.progBrowser) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE is_test AND NOT via_api_key AND program_id = $1`, f.progBrowser); n != 1 {
			t.Fatal("keyless test lead not stored")
		}
	})
	t.Run("a test key without test_mode: a test lead, the customer stays a click", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		before := s.count(`SELECT count(*) FROM lead_events WHERE is_test AND via_api_key AND program_id = $1`, f.progServer)
		r := s.lead(map[string]any{"click_id": cid, "customer_key": "test-key-lead"}, "Authorization", "Bearer "+f.keyTest)
		d, _ := r.body["data"].(map[string]any)
		if r.status != 200 || d["test_mode"] != true || d["programId"] != float64(f.progServer) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE is_test AND via_api_key AND program_id = $1`, f.progServer); n != before+1 {
			t.Fatalf("test leads %d -> %d", before, n)
		}
		if st, _, leads := s.status(cid); st != "click" || leads != 0 {
			t.Fatalf("status %s leads %d", st, leads)
		}
	})
	t.Run("a test lead settles nothing", func(t *testing.T) {
		cid := s.click(f.codeB, nil)
		r := s.lead(map[string]any{"click_id": cid, "additional_data": map[string]any{"test_mode": true}})
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if st, _, leads := s.status(cid); st != "click" || leads != 0 {
			t.Fatalf("status %s leads %d", st, leads)
		}
	})
}
