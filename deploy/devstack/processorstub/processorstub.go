// Package processorstub is the stand-in payment processor of the local
// stack (make run) and of the tests, as oidctest is the stand-in identity
// provider: the OAuth pages and API the console's connection uses
// (authorize page with one-click Approve, code exchange at /oauth/token,
// account retrieval at /v1/accounts/{id}, in the processor's documented
// shapes) and a "send a test payment" action that posts correctly signed
// checkout, refund and dispute (chargeback) events, in both event API
// versions commissions
// reads, to the commissions webhook for a connected account. Everything is
// in memory and deterministic (ids from counters, no randomness, no
// internet); it exists only here, real deployments set PROCESSOR_* to the
// real processor.
package processorstub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// API versions of the events a test payment sends: the current one
// (refunds as refund.created) and the one before it (charge.refunded with
// the cumulative amount_refunded).
const (
	APIVersionBasil  = "2025-03-31.basil"
	APIVersionLegacy = "2024-06-20"
)

// SignatureHeader is the webhook's signature header (commissions'
// processor httpapi.SignatureHeader).
const SignatureHeader = "Processor-Signature"

// Config is the stub's platform credentials and where its events go.
type Config struct {
	// ClientID and Secret are what accounts must present
	// (PROCESSOR_CONNECT_CLIENT_ID, PROCESSOR_CONNECT_SECRET).
	ClientID, Secret string
	// WebhookURL is commissions' POST /api/v1/webhooks/processor (through
	// the gateway); WebhookSecret its PROCESSOR_WEBHOOK_SECRET.
	WebhookURL, WebhookSecret string
	// Now stamps events and signatures; time.Now when nil.
	Now  func() time.Time
	HTTP *http.Client
}

// Stub is the stand-in processor.
type Stub struct {
	cfg Config

	mu       sync.Mutex
	next     int
	codes    map[string]string // unused authorization code -> account id
	accounts map[string]bool   // connected account ids
	payments int
}

// New makes a stub.
func New(cfg Config) *Stub {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	return &Stub{cfg: cfg, codes: map[string]string{}, accounts: map[string]bool{}}
}

// SetWebhook points test payments at url (the gateway is often started
// after the stub, whose address the services need first).
func (s *Stub) SetWebhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.WebhookURL = url
}

// Env is the accounts configuration that connects to the stub at base.
func (s *Stub) Env(base string) map[string]string {
	return map[string]string{"PROCESSOR_CONNECT_CLIENT_ID": s.cfg.ClientID, "PROCESSOR_CONNECT_SECRET": s.cfg.Secret, "PROCESSOR_API_URL": base}
}

// Handler serves the stub's pages and API.
func (s *Stub) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth/authorize", s.authorizePage)
	mux.HandleFunc("POST /oauth/authorize", s.authorize)
	mux.HandleFunc("POST /oauth/token", s.token)
	mux.HandleFunc("GET /v1/accounts/{id}", s.account)
	mux.HandleFunc("GET /test-payment", s.paymentPage)
	mux.HandleFunc("POST /test-payment", s.payment)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/test-payment", http.StatusFound) })
	return mux
}

func page(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = t.Execute(w, data)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// validRedirect accepts an absolute http(s) redirect URI.
func validRedirect(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var authorizeTmpl = template.Must(template.New("a").Parse(`<!doctype html>
<html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stand-in processor: connect your account</title>
<main style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem">
<h1>Connect your account</h1>
<p>svc (the local stack) asks to read your payments. This is the local stand-in payment processor: approving creates a test connected account.</p>
<form method="post" action="/oauth/authorize">
<input type="hidden" name="redirect_uri" value="{{.Redirect}}">
<input type="hidden" name="state" value="{{.State}}">
<button name="decision" value="approve">Approve</button>
<button name="decision" value="decline">Decline</button>
</form>
</main></html>
`))

var errorTmpl = template.Must(template.New("e").Parse(`<!doctype html>
<html lang="en"><meta charset="utf-8"><title>Stand-in processor</title>
<main style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem"><h1>Cannot continue</h1><p>{{.}}</p></main></html>
`))

func (s *Stub) authorizePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case q.Get("response_type") != "code":
		page(w, http.StatusBadRequest, errorTmpl, "response_type must be code")
	case q.Get("client_id") != s.cfg.ClientID:
		page(w, http.StatusBadRequest, errorTmpl, "Unknown client_id")
	case !validRedirect(q.Get("redirect_uri")):
		page(w, http.StatusBadRequest, errorTmpl, "redirect_uri must be an absolute http(s) address")
	default:
		page(w, http.StatusOK, authorizeTmpl, struct{ Redirect, State string }{q.Get("redirect_uri"), q.Get("state")})
	}
}

// authorize is the Approve (or Decline) click: a new connected account and
// a single-use code for it, sent back to the redirect URI with the state.
func (s *Stub) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !validRedirect(r.PostForm.Get("redirect_uri")) {
		page(w, http.StatusBadRequest, errorTmpl, "redirect_uri must be an absolute http(s) address")
		return
	}
	back, _ := url.Parse(r.PostForm.Get("redirect_uri"))
	q := back.Query()
	q.Set("state", r.PostForm.Get("state"))
	if r.PostForm.Get("decision") != "approve" {
		q.Set("error", "access_denied")
		q.Set("error_description", "The user denied your request")
	} else {
		code, _ := s.Approve()
		q.Set("code", code)
	}
	back.RawQuery = q.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// Approve makes a connected account and a code for it, as the Approve
// click does (tests call it to skip the page).
func (s *Stub) Approve() (code, account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	code = fmt.Sprintf("ac_local_%06d", s.next)
	account = fmt.Sprintf("acct_local%06d", s.next)
	s.codes[code] = account
	return code, account
}

func (s *Stub) platform(r *http.Request) bool {
	return hmac.Equal([]byte(r.Header.Get("Authorization")), []byte("Bearer "+s.cfg.Secret))
}

// token exchanges a code once, in the processor's OAuth token shape.
func (s *Stub) token(w http.ResponseWriter, r *http.Request) {
	if !s.platform(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "No valid API key provided"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "authorization_code" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	code := r.PostForm.Get("code")
	s.mu.Lock()
	acct, ok := s.codes[code]
	delete(s.codes, code)
	if ok {
		s.accounts[acct] = true
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "Authorization code does not exist or was already used"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": "sk_local_" + acct, "token_type": "bearer", "scope": "read_write",
		"livemode": true, "stripe_user_id": acct})
}

// account answers a connected account: a stand-in account can charge and
// be paid out at once.
func (s *Stub) account(w http.ResponseWriter, r *http.Request) {
	if !s.platform(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": "Invalid API key"}})
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	ok := s.accounts[id]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": "No such account"}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "account", "charges_enabled": true, "payouts_enabled": true,
		"details_submitted": true, "type": "standard"})
}

// Accounts lists the connected accounts, by id.
func (s *Stub) Accounts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.accounts))
	for a := range s.accounts {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Payment is a test payment: a checkout of Amount minor units of Currency
// on Account, attributed by ClickID (the tracker's svc_click_id) or
// CustomerKey, a refund of RefundAmount when positive, and a dispute of
// the whole payment opened and closed with the outcome Dispute ("lost": a
// chargeback; "won"; empty: none).
type Payment struct {
	Account      string `json:"account"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	ClickID      string `json:"click_id"`
	CustomerKey  string `json:"customer_key"`
	RefundAmount int64  `json:"refund_amount"`
	Dispute      string `json:"dispute"`
	// APIVersion is APIVersionBasil (default) or APIVersionLegacy.
	APIVersion string `json:"api_version"`
}

// Delivery is one event posted to the webhook and its answer.
type Delivery struct {
	EventID string          `json:"event_id"`
	Type    string          `json:"type"`
	Status  int             `json:"status"`
	Answer  json.RawMessage `json:"answer,omitempty"`
}

func (p *Payment) check() error {
	if p.APIVersion == "" {
		p.APIVersion = APIVersionBasil
	}
	if p.Currency == "" {
		p.Currency = "usd"
	}
	p.Currency = strings.ToLower(p.Currency)
	switch {
	case p.Account == "":
		return fmt.Errorf("account is required: connect an account first")
	case p.Amount <= 0:
		return fmt.Errorf("amount must be a positive number of minor units (cents)")
	case p.RefundAmount < 0 || p.RefundAmount > p.Amount:
		return fmt.Errorf("refund_amount must be from 0 to amount")
	case p.APIVersion != APIVersionBasil && p.APIVersion != APIVersionLegacy:
		return fmt.Errorf("api_version must be %s or %s", APIVersionBasil, APIVersionLegacy)
	case p.Dispute != "" && p.Dispute != "lost" && p.Dispute != "won":
		return fmt.Errorf("dispute must be lost, won or empty")
	}
	return nil
}

// Send posts the payment's checkout event, then its refund event and its
// dispute's opening and closing events when there are some, signed, to
// the webhook.
func (s *Stub) Send(ctx context.Context, p Payment) ([]Delivery, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.payments++
	n := s.payments
	hook := s.cfg.WebhookURL
	s.mu.Unlock()
	if hook == "" {
		return nil, fmt.Errorf("the stand-in processor has no webhook address")
	}
	now := s.cfg.Now().Unix()
	ref := fmt.Sprintf("local%06d", n)
	md := map[string]string{}
	if p.ClickID != "" {
		md["svc_click_id"] = p.ClickID
	}
	if p.CustomerKey != "" {
		md["svc_customer_key"] = p.CustomerKey
	}
	events := []map[string]any{s.event("evt_pay_"+ref, "checkout.session.completed", p, now, map[string]any{
		"id": "cs_live_" + ref, "object": "checkout.session", "mode": "payment", "status": "complete", "payment_status": "paid",
		"amount_subtotal": p.Amount, "amount_total": p.Amount, "currency": p.Currency, "customer": "cus_" + ref,
		"customer_details": map[string]any{"email": "buyer+" + ref + "@example.com", "name": "Test buyer"},
		"payment_intent":   "pi_" + ref, "invoice": nil, "subscription": nil, "metadata": md,
	})}
	if p.RefundAmount > 0 {
		if p.APIVersion == APIVersionLegacy {
			events = append(events, s.event("evt_refund_"+ref, "charge.refunded", p, now, map[string]any{
				"id": "ch_" + ref, "object": "charge", "amount": p.Amount, "amount_captured": p.Amount, "amount_refunded": p.RefundAmount,
				"currency": p.Currency, "customer": "cus_" + ref, "invoice": nil, "payment_intent": "pi_" + ref, "refunded": p.RefundAmount == p.Amount,
			}))
		} else {
			events = append(events, s.event("evt_refund_"+ref, "refund.created", p, now, map[string]any{
				"id": "re_" + ref, "object": "refund", "amount": p.RefundAmount, "charge": "ch_" + ref, "created": now,
				"currency": p.Currency, "metadata": map[string]any{}, "payment_intent": "pi_" + ref, "reason": "requested_by_customer", "status": "succeeded",
			}))
		}
	}
	if p.Dispute != "" {
		dispute := map[string]any{"id": "dp_" + ref, "object": "dispute", "amount": p.Amount, "charge": "ch_" + ref, "created": now,
			"currency": p.Currency, "payment_intent": "pi_" + ref, "reason": "fraudulent", "status": "needs_response"}
		closed := map[string]any{}
		for k, v := range dispute {
			closed[k] = v
		}
		closed["status"] = p.Dispute
		events = append(events, s.event("evt_dispute_"+ref, "charge.dispute.created", p, now, dispute),
			s.event("evt_dispute_closed_"+ref, "charge.dispute.closed", p, now, closed))
	}
	out := make([]Delivery, 0, len(events))
	for _, ev := range events {
		d, err := s.post(ctx, hook, ev)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (s *Stub) event(id, typ string, p Payment, created int64, object map[string]any) map[string]any {
	return map[string]any{"id": id, "object": "event", "api_version": p.APIVersion, "account": p.Account, "created": created,
		"livemode": true, "pending_webhooks": 1, "type": typ, "data": map[string]any{"object": object}}
}

// Sign is the processor's signature of body at t.
func Sign(secret string, t int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", t)
	mac.Write(body)
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

func (s *Stub) post(ctx context.Context, hook string, ev map[string]any) (Delivery, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return Delivery{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return Delivery{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(s.cfg.WebhookSecret, s.cfg.Now().Unix(), body))
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return Delivery{}, fmt.Errorf("post %s: %w", ev["type"], err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	d := Delivery{EventID: ev["id"].(string), Type: ev["type"].(string), Status: resp.StatusCode}
	if json.Valid(answer) {
		d.Answer = answer
	}
	return d, nil
}

var paymentTmpl = template.Must(template.New("p").Parse(`<!doctype html>
<html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stand-in processor: send a test payment</title>
<main style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 3rem auto; padding: 0 1rem">
<h1>Send a test payment</h1>
{{if .Message}}<p role="status">{{.Message}}</p>{{end}}
{{if .Deliveries}}<ul>{{range .Deliveries}}<li>{{.Type}} {{.EventID}}: webhook answered {{.Status}}</li>{{end}}</ul>{{end}}
{{if .Accounts}}
<form method="post" action="/test-payment">
<p><label>Connected account <select name="account">{{range .Accounts}}<option>{{.}}</option>{{end}}</select></label></p>
<p><label>Amount (cents) <input name="amount" type="number" min="1" value="2500" required></label></p>
<p><label>Currency <input name="currency" value="usd" size="4"></label></p>
<p><label>Click id (svc_click_id from the tracker, so the sale is attributed) <input name="click_id"></label></p>
<p><label>Customer key (svc_customer_key, instead of a click) <input name="customer_key"></label></p>
<p><label>Refund (cents, 0 for none) <input name="refund_amount" type="number" min="0" value="0"></label></p>
<p><label>Dispute <select name="dispute"><option value="">none</option><option value="lost">lost (a chargeback)</option><option value="won">won</option></select></label></p>
<p><label>Event API version <select name="api_version"><option>{{.Basil}}</option><option>{{.Legacy}}</option></select></label></p>
<button>Send</button>
</form>
{{else}}<p>No connected account yet: connect the payment processor from the dashboard (Settings &gt; Payments) first.</p>{{end}}
</main></html>
`))

type paymentView struct {
	Message       string
	Deliveries    []Delivery
	Accounts      []string
	Basil, Legacy string
}

func (s *Stub) paymentPage(w http.ResponseWriter, _ *http.Request) {
	page(w, http.StatusOK, paymentTmpl, paymentView{Accounts: s.Accounts(), Basil: APIVersionBasil, Legacy: APIVersionLegacy})
}

// payment sends a test payment: JSON in, JSON out (tests), or the page's
// form in, the page out.
func (s *Stub) payment(w http.ResponseWriter, r *http.Request) {
	var p Payment
	isJSON := strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
	if isJSON {
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&p); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "malformed JSON"})
			return
		}
	} else {
		if err := r.ParseForm(); err != nil {
			page(w, http.StatusBadRequest, paymentTmpl, paymentView{Message: "malformed form", Accounts: s.Accounts(), Basil: APIVersionBasil, Legacy: APIVersionLegacy})
			return
		}
		f := r.PostForm
		p = Payment{Account: f.Get("account"), Currency: f.Get("currency"), ClickID: f.Get("click_id"), CustomerKey: f.Get("customer_key"), APIVersion: f.Get("api_version"),
			Dispute: f.Get("dispute")}
		p.Amount, _ = strconv.ParseInt(f.Get("amount"), 10, 64)
		p.RefundAmount, _ = strconv.ParseInt(f.Get("refund_amount"), 10, 64)
	}
	ds, err := s.Send(r.Context(), p)
	status := http.StatusOK
	msg := "Sent."
	if err != nil {
		status, msg = http.StatusBadRequest, err.Error()
	}
	if isJSON {
		if err != nil {
			writeJSON(w, status, map[string]any{"error": msg, "deliveries": ds})
			return
		}
		writeJSON(w, status, map[string]any{"deliveries": ds})
		return
	}
	page(w, status, paymentTmpl, paymentView{Message: msg, Deliveries: ds, Accounts: s.Accounts(), Basil: APIVersionBasil, Legacy: APIVersionLegacy})
}
