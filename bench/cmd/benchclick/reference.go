package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
)

// The reference is the floor a click route cannot beat on this machine: bare
// net/http, the same JSON body decoded strictly, the link code pulled out of
// affiliate_url, and one INSERT into a click-events table through a pgx pool
// of the service's size. No lookup, no customer, no counters, no middleware.
const referenceSchema = "bench_reference"

const referenceDDL = `
CREATE SCHEMA IF NOT EXISTS bench_reference;
CREATE TABLE IF NOT EXISTS bench_reference.click_events (
	id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	click_id          text        NOT NULL,
	link_code         text        NOT NULL,
	program_id        bigint,
	page_url          text,
	page_title        text,
	referrer_url      text,
	session_id        text,
	user_agent        text,
	screen_resolution text,
	viewport_size     text,
	language          text,
	timezone          text,
	ip                inet,
	reused            boolean     NOT NULL,
	created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS click_events_click_id ON bench_reference.click_events (click_id);`

// referenceRequest is the click body, decoded strictly like the service does.
type referenceRequest struct {
	AffiliateURL     string          `json:"affiliate_url"`
	PageURL          string          `json:"page_url"`
	PageTitle        string          `json:"page_title"`
	ReferrerURL      string          `json:"referrer_url"`
	SessionID        string          `json:"session_id"`
	UserAgent        string          `json:"user_agent"`
	ScreenResolution string          `json:"screen_resolution"`
	ViewportSize     string          `json:"viewport_size"`
	Language         string          `json:"language"`
	Timezone         string          `json:"timezone"`
	ExistingClickID  string          `json:"existing_click_id"`
	ProgramID        json.RawMessage `json:"program_id"`
	VisitorIP        string          `json:"visitor_ip"`
	AdditionalData   map[string]any  `json:"additional_data"`
}

type referenceServer struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	seq    atomic.Uint64
	now    func() time.Time
}

// openReference creates the reference table in dsn's database and opens a
// pool of maxConns connections.
func openReference(ctx context.Context, dsn string, maxConns int32, logger *slog.Logger) (*referenceServer, error) {
	pool, err := rig.OpenPool(ctx, dsn, maxConns, "benchclick-reference", nil)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	if _, err := pool.Exec(ctx, referenceDDL); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reference: create table: %w", err)
	}
	return &referenceServer{pool: pool, logger: logger, now: time.Now}, nil
}

func (s *referenceServer) Close() { s.pool.Close() }

func (s *referenceServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/track/click", s.click)
	return mux
}

func (s *referenceServer) click(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Content-Type must be application/json"})
		return
	}
	var req referenceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Invalid JSON body"})
		return
	}
	code, err := linkCode(req.AffiliateURL)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": err.Error()})
		return
	}
	var programID *int64
	if len(req.ProgramID) > 0 && string(req.ProgramID) != "null" {
		id, err := parseProgramID(req.ProgramID)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Unknown program_id"})
			return
		}
		programID = &id
	}
	ua := req.UserAgent
	if ua == "" {
		ua = r.UserAgent()
	}
	clickID := req.ExistingClickID
	reused := clickID != ""
	if !reused {
		clickID = "cust_" + strconv.FormatInt(s.now().UnixMilli(), 10) + "_" + strconv.FormatUint(s.seq.Add(1), 10)
	}
	var ip *netip.Addr
	if a, ok := forwardedClient(r); ok {
		ip = &a
	}
	_, err = s.pool.Exec(r.Context(), `INSERT INTO bench_reference.click_events
		(click_id, link_code, program_id, page_url, page_title, referrer_url, session_id, user_agent,
		 screen_resolution, viewport_size, language, timezone, ip, reused)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		clickID, code, programID, req.PageURL, req.PageTitle, req.ReferrerURL, req.SessionID, ua,
		req.ScreenResolution, req.ViewportSize, req.Language, req.Timezone, ip, reused)
	if err != nil {
		s.logger.Error("reference insert", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"success": false, "error": "Failed to record click"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "click_id": clickID, "partner_code": code, "cookie_window_days": 60})
}

// linkCode extracts the aff (or via) parameter of an affiliate URL.
func linkCode(affiliateURL string) (string, error) {
	if affiliateURL == "" {
		return "", errors.New("affiliate_url is required")
	}
	u, err := url.Parse(affiliateURL)
	if err != nil {
		return "", errors.New("affiliate_url is not a valid URL")
	}
	q := u.Query()
	code := q.Get("aff")
	if code == "" {
		code = q.Get("via")
	}
	if code == "" {
		return "", errors.New("affiliate_url has no aff or via parameter")
	}
	return code, nil
}

// parseProgramID accepts an integer or a numeric string.
func parseProgramID(raw json.RawMessage) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// forwardedClient believes the last X-Forwarded-For entry when the peer is
// on loopback (the only proxy the benchmark uses), else the peer address.
func forwardedClient(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	if !peer.IsLoopback() {
		return peer, true
	}
	xff := r.Header.Get("X-Forwarded-For")
	if i := strings.LastIndexByte(xff, ','); i >= 0 {
		xff = xff[i+1:]
	}
	if a, err := netip.ParseAddr(strings.TrimSpace(xff)); err == nil {
		return a, true
	}
	return peer, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// countRows counts rows of a table, or reports false when it does not exist.
func countRows(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, table string) (int64, bool, error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return 0, false, fmt.Errorf("look up %s: %w", table, err)
	}
	if !exists {
		return 0, false, nil
	}
	var n int64
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier(strings.Split(table, ".")).Sanitize()).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count %s: %w", table, err)
	}
	return n, true, nil
}
