package openapivalidate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/svc-dev/svc/api"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The public routes that exist today (gateway rules with Public: true, as
// the services serve them). /admin/v1 is not public.
var wantOperations = []string{
	"GET /api/openapi.json",
	"GET /api/tracking/activity/{programId}",
	"GET /api/tracking/partners/{programId}",
	"GET /api/tracking/performance/{programId}",
	"GET /api/tracking/sources/{programId}",
	"GET /api/tracking/status/{programId}",
	"GET /api/v1/cli/auth/poll",
	"GET /api/v1/cli/programs",
	"GET /api/v1/cli/status",
	"GET /api/v1/dashboard/auth/start",
	"GET /api/v1/dashboard/me",
	"GET /api/v1/programs/me/analytics/sources",
	"GET /api/v1/programs/me/readiness",
	"GET /api/v1/programs/{id}/settings",
	"GET /api/v1/programs",
	"POST /api/v1/programs",
	"GET /api/v1/track/config",
	"GET /svc.js",
	"OPTIONS /api/v1/track/click",
	"OPTIONS /api/v1/track/config",
	"OPTIONS /api/v1/track/lead",
	"OPTIONS /api/v1/track/visit",
	"PATCH /api/v1/programs/{id}/settings",
	"GET /api/v1/programs/{id}/keys",
	"POST /api/v1/programs/{id}/keys",
	"POST /api/v1/programs/{id}/keys/{keyId}/rotation",
	"DELETE /api/v1/programs/{id}/keys/{keyId}",
	"POST /api/v1/programs/{id}/partners",
	"POST /api/v1/programs/{id}/partners/{partnerId}/approve",
	"POST /api/v1/programs/{id}/partners/{partnerId}/reject",
	"POST /api/v1/programs/{id}/partners/{partnerId}/links",
	"PATCH /api/v1/programs/{id}/links/{linkId}",
	// The console's commissions and payouts (commissions, issue 21).
	"GET /api/v1/programs/{id}/commissions",
	"GET /api/v1/programs/{id}/payouts",
	"POST /api/v1/programs/{id}/payouts",
	"POST /api/v1/programs/{id}/payouts/{payoutId}/pay",
	"POST /api/v1/programs/{id}/payouts/{payoutId}/cancel",
	// The console's webhook endpoints (webhooks, issue 22).
	"GET /api/v1/programs/{id}/webhooks",
	"POST /api/v1/programs/{id}/webhooks",
	"PATCH /api/v1/programs/{id}/webhooks/{webhookId}",
	"DELETE /api/v1/programs/{id}/webhooks/{webhookId}",
	"POST /api/v1/programs/{id}/webhooks/{webhookId}/secret",
	"POST /api/v1/programs/{id}/webhooks/{webhookId}/test",
	"GET /api/v1/programs/{id}/webhooks/{webhookId}/deliveries",
	"POST /api/v1/programs/{id}/webhooks/{webhookId}/deliveries/{deliveryId}/retry",
	"GET /api/v1/programs/{id}/webhooks/notifications",
	// svc listen (webhooks, issue 22).
	"POST /api/v1/programs/{id}/webhooks/listen",
	"DELETE /api/v1/programs/{id}/webhooks/listen/{listenerId}",
	"GET /api/v1/programs/{id}/webhooks/listen/{listenerId}/events",
	"GET /api/v1/programs/{id}/members",
	"GET /api/v1/programs/{id}/partners",
	"POST /api/v1/programs/{id}/members",
	"DELETE /api/v1/programs/{id}/members/{userId}",
	"POST /api/v1/programs/{id}/processor/connect",
	"DELETE /api/v1/programs/{id}/processor",
	"GET /api/v1/processor/connect/callback",
	"POST /api/v1/cli/auth/callback",
	"POST /api/v1/cli/auth/confirm",
	"POST /api/v1/cli/auth/start",
	"POST /api/v1/cli/init",
	"POST /api/v1/cli/stripe-connect",
	"POST /api/v1/cli/test-event",
	"POST /api/v1/dashboard/auth/callback",
	"POST /api/v1/dashboard/auth/signout",
	"POST /api/v1/track/click",
	"POST /api/v1/track/lead",
	"POST /api/v1/track/sale",
	"POST /api/v1/track/refund",
	"POST /api/v1/track/visit",
	"POST /api/v1/webhooks/processor",
}

const requestID = "abcd1234abcd1234abcd1234abcd1234"

var (
	sharedOnce sync.Once
	shared     *Validator
	sharedErr  error
)

func newTestValidator(t *testing.T) *Validator {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = NewValidator() })
	if sharedErr != nil {
		t.Fatalf("NewValidator: %v", sharedErr)
	}
	return shared
}

// spec is the document decoded from api.JSON(), for walking it in tests.
func spec(t *testing.T) map[string]any {
	t.Helper()
	raw, err := api.JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("api.JSON() is not valid JSON: %v", err)
	}
	return doc
}

func TestDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	newTestValidator(t)
	doc := spec(t)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	if !bytes.HasPrefix(bytes.TrimSpace(stripComments(api.YAML())), []byte("openapi: 3.1.0")) {
		t.Fatal("api.YAML() does not start with openapi: 3.1.0")
	}
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(line, []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

func TestInvalidDocumentIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
	}{
		{"OpenAPI 3.0", "openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths: {}\n"},
		{"no info", "openapi: 3.1.0\npaths: {}\n"},
		{"response without description", "openapi: 3.1.0\ninfo: {title: x, version: '1'}\npaths:\n  /x:\n    get:\n      responses:\n        '200': {content: {}}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := newValidator([]byte(tc.doc)); err == nil {
				t.Fatal("an invalid document was accepted")
			}
		})
	}
}

func TestJSONKeepsOrderAndTypes(t *testing.T) {
	t.Parallel()
	raw, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte(`{"openapi":"3.1.0","info":`)) {
		t.Fatalf("JSON starts %q", raw[:40])
	}
	if !bytes.Contains(raw, []byte(`Bearer <token>`)) {
		t.Fatal("JSON escaped angle brackets")
	}
	doc := spec(t)
	resp := doc["paths"].(map[string]any)["/api/v1/track/click"].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)
	if _, ok := resp["200"]; !ok {
		t.Fatal("status keys are not strings")
	}
	h := doc["components"].(map[string]any)["headers"].(map[string]any)["X-RateLimit-Limit"].(map[string]any)
	if h["example"] != float64(60) {
		t.Fatalf("numbers are not kept as numbers: %#v", h["example"])
	}
	if a, b := api.YAML(), api.YAML(); &a[0] == &b[0] {
		t.Fatal("YAML returns the embedded bytes themselves")
	}
}

// TestPublicRoutes checks the document lists exactly the public routes
// that exist today, and nothing of the admin API.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	doc := spec(t)
	var got []string
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				got = append(got, strings.ToUpper(method)+" "+path)
			}
		}
		if strings.HasPrefix(path, "/admin/") {
			t.Errorf("admin path %s is in the public document", path)
		}
	}
	sort.Strings(got)
	want := slices.Clone(wantOperations)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("operations differ\n got: %q\nwant: %q", got, want)
	}
}

type reply struct {
	status  int
	headers map[string]string
	body    string
}

func (r reply) response(req *http.Request) *http.Response {
	h := http.Header{}
	for k, v := range r.headers {
		h.Set(k, v)
	}
	var body io.ReadCloser = http.NoBody
	if r.body != "" {
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/json; charset=utf-8")
		}
		body = io.NopCloser(strings.NewReader(r.body))
	}
	return &http.Response{StatusCode: r.status, Header: h, Body: body, Request: req, ContentLength: int64(len(r.body))}
}

func limited(extra ...string) map[string]string {
	h := map[string]string{
		"X-Request-ID":          requestID,
		"X-RateLimit-Limit":     "60",
		"X-RateLimit-Remaining": "59",
		"X-RateLimit-Reset":     "1767225660",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(h, extra[i])
			continue
		}
		h[extra[i]] = extra[i+1]
	}
	return h
}

func TestResponses(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	const clickBody = `{"affiliate_url":"https://shop.example/?aff=anna10"}`
	cases := []struct {
		name   string
		method string
		path   string
		reply  reply
		// wantFail lists substrings of the error; nil means valid.
		wantFail []string
	}{
		{
			name: "click 200", method: "POST", path: "/api/v1/track/click",
			reply: reply{200, limited(), `{"success":true,"click_id":"cust_1767225600123_48213","partner_code":"anna10","cookie_window_days":60}`},
		},
		{
			name: "click 200 in test mode", method: "POST", path: "/api/v1/track/click",
			reply: reply{200, limited(), `{"success":true,"message":"Test click recorded","data":{"eventId":9,"programId":42,"test_mode":true}}`},
		},
		{
			name: "click 400 platform envelope", method: "POST", path: "/api/v1/track/click",
			reply: reply{400, limited(), `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"affiliate_url is required","details":{}}}`},
		},
		{
			name: "click 400 for a wrong Content-Type", method: "POST", path: "/api/v1/track/click",
			reply: reply{400, limited(), `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Content-Type must be application/json","details":{}}}`},
		},
		{
			name: "click 410 link_disabled", method: "POST", path: "/api/v1/track/click",
			reply: reply{410, limited(), `{"error":{"code":"link_disabled","message":"This referral link has been disabled","hint":"Ask the partner for a current link."},"message":"This referral link has been disabled","success":false}`},
		},
		{
			name: "click 413", method: "POST", path: "/api/v1/track/click",
			reply: reply{413, limited(), `{"data":null,"error":{"status":413,"name":"PayloadTooLargeError","message":"Request body must not exceed 65536 bytes","details":{}}}`},
		},
		{
			name: "sale 429 typed with headers", method: "POST", path: "/api/v1/track/sale",
			reply: reply{429, limited("Retry-After", "42"), `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 42 seconds.","retry_after_seconds":42}}`},
		},
		{
			name: "sale 409 names the sale", method: "POST", path: "/api/v1/track/sale",
			reply: reply{409, limited(), `{"data":null,"error":{"status":409,"name":"ConflictError","message":"Duplicate transaction_id. This sale has already been recorded.","details":{"sale_id":7},"code":"duplicate_transaction"}}`},
		},
		{
			name: "sale 401 retired key", method: "POST", path: "/api/v1/track/sale",
			reply: reply{401, limited(), `{"error":{"code":"api_key_rotation_required","message":"This API key is past its rotation deadline and no longer works.","hint":"Create a new API key.","docs_url":"https://docs.svc.dev/api-keys/rotation"}}`},
		},
		{
			name: "sale 200 with rotation warnings", method: "POST", path: "/api/v1/track/sale",
			reply: reply{200, limited("Deprecation", "@1767225600", "Sunset", "Sun, 01 Mar 2026 00:00:00 GMT", "Link", "<https://docs.svc.dev/api-keys/rotation>; rel='deprecation'"),
				`{"success":true,"message":"Sale tracked successfully","sale_id":7,"transaction_id":"in_1","click_id":"cust_1_2","customer_status":"conversion","warnings":[{"code":"api_key_rotation_required","message":"m","hint":"h","rotate_by":"2026-03-01T00:00:00Z","docs_url":"https://docs.svc.dev/api-keys/rotation"}]}`},
		},
		{
			name: "CLI status 200 without X-Request-ID", method: "GET", path: "/api/v1/cli/status",
			reply: reply{200, limited("X-Request-ID", ""), `{"data":{"programId":"42","stepStatuses":{"pageview":"pending","referrals":"pending","payments":"pending"},"statistics":{"pageview":{"testEventCount":0,"hasTestEvents":false,"latestTestEvent":null},"referrals":{"testEventCount":0,"hasTestEvents":false,"latestTestEvent":null},"payments":{"paymentTrackingMode":"processor_connect","methodReady":false,"processorConnectionStatus":"","isProcessorConnected":false,"processorAccountId":null,"chargesEnabled":false,"payoutsEnabled":false,"detailsSubmitted":false,"connectionDate":null}},"hasPartners":false,"lastUpdated":"2026-01-01T10:00:00.000Z"}}`},
		},
		{
			name: "CLI 500 with the request id", method: "POST", path: "/api/v1/cli/init",
			reply: reply{500, limited(), `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to create program (request_id: ` + requestID + `)","details":{"request_id":"` + requestID + `"}}}`},
		},
		{
			name: "settings 200", method: "GET", path: "/api/v1/programs/42/settings",
			reply: reply{200, limited(), `{"data":{"allowed_origins":[],"attribution_window_days":60,"lead_auth_policy":"server_required","payment_tracking_mode":"processor_connect","program_id":42}}`},
		},
		{
			name: "400 whose error.name is missing", method: "POST", path: "/api/v1/track/click",
			reply:    reply{400, limited(), `{"data":null,"error":{"status":400,"message":"affiliate_url is required","details":{}}}`},
			wantFail: []string{"name"},
		},
		{
			name: "400 with the name of another status", method: "POST", path: "/api/v1/track/click",
			reply:    reply{400, limited(), `{"data":null,"error":{"status":400,"name":"NotFoundError","message":"x","details":{}}}`},
			wantFail: []string{"does not match the document"},
		},
		{
			name: "undocumented status", method: "POST", path: "/api/v1/track/click",
			reply:    reply{418, limited(), `{"data":null,"error":{"status":418,"name":"ImATeapotError","message":"x","details":{}}}`},
			wantFail: []string{"418"},
		},
		{
			name: "429 without Retry-After", method: "POST", path: "/api/v1/track/sale",
			reply:    reply{429, limited(), `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 42 seconds.","retry_after_seconds":42}}`},
			wantFail: []string{"Retry-After"},
		},
		{
			name: "429 with a data key is not the typed envelope", method: "POST", path: "/api/v1/track/sale",
			reply:    reply{429, limited("Retry-After", "42"), `{"data":null,"error":{"status":429,"code":"rate_limited","message":"m","retry_after_seconds":42}}`},
			wantFail: []string{"does not match the document"},
		},
		{
			name: "click 200 without the rate-limit headers", method: "POST", path: "/api/v1/track/click",
			reply:    reply{200, map[string]string{"X-Request-ID": requestID}, `{"success":true,"click_id":"cust_1_2","partner_code":"a","cookie_window_days":60}`},
			wantFail: []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
		},
		{
			name: "route not in the document", method: "GET", path: "/admin/v1/programs",
			reply:    reply{200, limited(), `{"data":[]}`},
			wantFail: []string{"/admin/v1/programs"},
		},
		{
			name: "webhook endpoint created with its secret", method: "POST", path: "/api/v1/programs/42/webhooks",
			reply: reply{201, limited(), `{"data":{"id":3,"url":"https://hooks.brand.example/svc","description":"","events":["sale.created"],"include_test":false,"enabled":true,"disabled_reason":null,"disabled_at":null,"created_at":"2026-11-28T10:00:00Z","updated_at":"2026-11-28T10:00:00Z","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/Sdoli1Vh8k="}}`},
		},
		{
			name: "webhook endpoint list showing a secret", method: "GET", path: "/api/v1/programs/42/webhooks",
			reply:    reply{200, limited(), `{"data":[{"id":3,"url":"https://hooks.brand.example/svc","description":"","events":["sale.created"],"include_test":false,"enabled":false,"disabled_reason":"failing","disabled_at":"2026-11-28T10:00:00Z","created_at":"2026-11-28T10:00:00Z","updated_at":"2026-11-28T10:00:00Z","secret":"whsec_x"}]}`},
			wantFail: []string{"secret"},
		},
		{
			name: "webhook delivery log", method: "GET", path: "/api/v1/programs/42/webhooks/3/deliveries",
			reply: reply{200, limited(), `{"data":[{"id":9,"event_id":"evt_0123456789abcdef0123456789abcdef","event_type":"ping","status":"failed","attempts":9,"last_status":null,"last_error":"timeout","last_duration_ms":10000,"last_attempt_at":"2026-11-28T10:00:00Z","next_attempt_at":null,"delivered_at":null,"created_at":"2026-11-25T10:00:00Z"}],"next_cursor":"OQ"}`},
		},
		{
			name: "webhook notifications, one of a deleted endpoint", method: "GET", path: "/api/v1/programs/42/webhooks/notifications",
			reply: reply{200, limited(), `{"data":[{"id":5,"kind":"endpoint_disabled","endpoint_id":3,"url":"https://hooks.brand.example/svc","created_at":"2026-11-28T10:00:00Z"},{"id":4,"kind":"endpoint_disabled","endpoint_id":2,"url":null,"created_at":"2026-11-20T10:00:00Z"}],"next_cursor":"NA"}`},
		},
		{
			name: "webhook notification of an unknown kind", method: "GET", path: "/api/v1/programs/42/webhooks/notifications",
			reply:    reply{200, limited(), `{"data":[{"id":5,"kind":"endpoint_deleted","endpoint_id":3,"url":null,"created_at":"2026-11-28T10:00:00Z"}],"next_cursor":null}`},
			wantFail: []string{"kind"},
		},
		{
			name: "webhook deleted", method: "DELETE", path: "/api/v1/programs/42/webhooks/3",
			reply: reply{204, limited(), ``},
		},
		{
			name: "method not in the document", method: "DELETE", path: "/api/v1/track/click",
			reply:    reply{200, limited(), `{}`},
			wantFail: []string{"DELETE"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var reqBody io.Reader
			if tc.method == "POST" {
				reqBody = strings.NewReader(clickBody)
			}
			req := httptest.NewRequest(tc.method, "http://localhost:8080"+tc.path, reqBody)
			resp := tc.reply.response(req)
			err := v.ValidateResponse(req, resp)
			if tc.wantFail == nil && err != nil {
				t.Fatalf("valid response refused:\n%v", err)
			}
			if tc.wantFail != nil {
				if err == nil {
					t.Fatal("invalid response accepted")
				}
				for _, s := range tc.wantFail {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not mention %q:\n%v", s, err)
					}
				}
			}
			got, rerr := io.ReadAll(resp.Body)
			if rerr != nil || string(got) != tc.reply.body {
				t.Fatalf("response body not restored: %q, %v", got, rerr)
			}
			if tc.method == "POST" {
				if got, _ := io.ReadAll(req.Body); string(got) != clickBody {
					t.Fatalf("request body not restored: %q", got)
				}
			}
		})
	}
}

func TestRequests(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	cases := []struct {
		name, method, path, body string
		headers                  map[string]string
		wantOK                   bool
	}{
		{"click", "POST", "/api/v1/track/click", `{"affiliate_url":"https://shop.example/?aff=a","program_id":"42","screen_resolution":"1920x1080"}`, nil, true},
		// Descriptive fields never refuse a click: a screen size of another
		// shape is accepted (and dropped); a value that is not a string is not.
		{"click with a screen_resolution of another shape", "POST", "/api/v1/track/click", `{"affiliate_url":"https://shop.example/?aff=a","screen_resolution":"big"}`, nil, true},
		{"click with a numeric page_title", "POST", "/api/v1/track/click", `{"affiliate_url":"https://shop.example/?aff=a","page_title":12}`, nil, false},
		{"click without affiliate_url", "POST", "/api/v1/track/click", `{"page_url":"https://shop.example/"}`, nil, false},
		{"sale with a key", "POST", "/api/v1/track/sale", `{"transaction_id":"in_1","amount_cents":4900,"currency":"usd"}`, map[string]string{"Authorization": "Bearer k"}, true},
		{"test sale without transaction_id", "POST", "/api/v1/track/sale", `{"amount_cents":100,"currency":"EUR","additional_data":{"test_mode":true}}`, map[string]string{"Authorization": "Bearer k"}, true},
		{"sale without a key", "POST", "/api/v1/track/sale", `{"transaction_id":"in_1","amount_cents":4900,"currency":"USD"}`, nil, false},
		{"sale with a negative amount", "POST", "/api/v1/track/sale", `{"transaction_id":"in_1","amount_cents":-1,"currency":"USD"}`, map[string]string{"Authorization": "Bearer k"}, false},
		{"lead without a key (browser mode)", "POST", "/api/v1/track/lead", `{"click_id":"cust_1_2","program_id":42}`, nil, true},
		{"config without program_id", "GET", "/api/v1/track/config", "", nil, false},
		{"settings patch with an unknown key", "PATCH", "/api/v1/programs/42/settings", `{"cookie_duration":30}`, map[string]string{"Authorization": "Bearer a.b.c"}, false},
		{"webhook without its signature", "POST", "/api/v1/webhooks/processor", `{"id":"evt_1","type":"x","data":{"object":{}}}`, nil, false},
		{"admin route", "GET", "/admin/v1/programs", "", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, "http://localhost:8080"+tc.path, body)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, val := range tc.headers {
				req.Header.Set(k, val)
			}
			err := v.ValidateRequest(req)
			if tc.wantOK && err != nil {
				t.Fatalf("valid request refused:\n%v", err)
			}
			if !tc.wantOK && err == nil {
				t.Fatal("invalid request accepted")
			}
			if tc.body != "" {
				if got, _ := io.ReadAll(req.Body); string(got) != tc.body {
					t.Fatalf("request body not restored: %q", got)
				}
			}
		})
	}
}

// TestExamplesMatchTheirSchemas validates every JSON response example of
// the document against its own operation, with the response's required
// headers set from their examples: a drifting example or schema fails here.
func TestExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	doc := spec(t)
	comps := doc["components"].(map[string]any)
	resolve := func(m map[string]any) map[string]any {
		for {
			ref, ok := m["$ref"].(string)
			if !ok {
				return m
			}
			parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
			m = comps[parts[0]].(map[string]any)[parts[1]].(map[string]any)
		}
	}
	n := 0
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			for status, r := range op.(map[string]any)["responses"].(map[string]any) {
				resp := resolve(r.(map[string]any))
				headers := map[string]string{}
				hs, _ := resp["headers"].(map[string]any)
				for name, h := range hs {
					h := resolve(h.(map[string]any))
					if req, _ := h["required"].(bool); req {
						headers[name] = exampleText(h["example"])
					}
				}
				content, _ := resp["content"].(map[string]any)
				mt, ok := content["application/json"].(map[string]any)
				if !ok {
					continue
				}
				examples := map[string]any{}
				if e, ok := mt["example"]; ok {
					examples["example"] = e
				}
				if es, ok := mt["examples"].(map[string]any); ok {
					for k, e := range es {
						examples[k] = e.(map[string]any)["value"]
					}
				}
				code, err := strconv.Atoi(status)
				if err != nil {
					t.Fatalf("%s %s: status %q", method, path, status)
				}
				for name, value := range examples {
					body, err := json.Marshal(value)
					if err != nil {
						t.Fatal(err)
					}
					n++
					concrete := strings.NewReplacer("{id}", "42", "{keyId}", "7", "{partnerId}", "5", "{linkId}", "31", "{webhookId}", "3").Replace(path)
					req := httptest.NewRequest(strings.ToUpper(method), "http://localhost:8080"+concrete, nil)
					if err := v.ValidateResponse(req, reply{code, headers, string(body)}.response(req)); err != nil {
						t.Errorf("%s %s %s example %q:\n%v", strings.ToUpper(method), path, status, name, err)
					}
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d response examples checked", n)
	}
}

func exampleText(v any) string {
	switch x := v.(type) {
	case nil:
		return "x"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func TestValidationErrorListsEveryFailure(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	req := httptest.NewRequest("POST", "http://localhost:8080/api/v1/track/click", strings.NewReader(`{}`))
	resp := reply{200, map[string]string{}, `{"success":true}`}.response(req)
	err := v.ValidateResponse(req, resp)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{"X-Request-ID", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not list %s:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "\n  - ") < 5 {
		t.Errorf("want every failure on its own line:\n%s", msg)
	}
}

// TestRequestExamplesMatchTheirSchemas validates every JSON request example
// against its operation (with a credential for the routes that need one).
func TestRequestExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	doc := spec(t)
	n := 0
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			rb, ok := op.(map[string]any)["requestBody"].(map[string]any)
			if !ok {
				continue
			}
			mt, ok := rb["content"].(map[string]any)["application/json"].(map[string]any)
			if !ok {
				continue
			}
			examples := map[string]any{}
			if e, ok := mt["example"]; ok {
				examples["example"] = e
			}
			if es, ok := mt["examples"].(map[string]any); ok {
				for k, e := range es {
					examples[k] = e.(map[string]any)["value"]
				}
			}
			for name, value := range examples {
				body, err := json.Marshal(value)
				if err != nil {
					t.Fatal(err)
				}
				n++
				concrete := strings.NewReplacer("{id}", "42", "{keyId}", "7", "{partnerId}", "5", "{linkId}", "31", "{webhookId}", "3").Replace(path)
				req := httptest.NewRequest(strings.ToUpper(method), "http://localhost:8080"+concrete, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer example-token")
				req.Header.Set("Processor-Signature", "t=1767225600,v1=00")
				if err := v.ValidateRequest(req); err != nil {
					t.Errorf("%s %s request example %q:\n%v", strings.ToUpper(method), path, name, err)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d request examples checked", n)
	}
}
