package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
)

// The reference is the floor a sale or refund route cannot beat on this
// machine: bare net/http, the same JSON body decoded with encoding/json, and
// one statement through a pgx pool of the services' size: an INSERT of the
// sale, an UPDATE of that row for a refund. No authentication, no
// attribution, no commission, no outbox, no middleware.
const referenceSchema = "bench_sale_reference"

const referenceDDL = `
CREATE SCHEMA bench_sale_reference;
CREATE TABLE bench_sale_reference.sales (
	id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	transaction_id      text        NOT NULL UNIQUE,
	amount_cents        bigint      NOT NULL,
	currency            text        NOT NULL,
	click_id            text,
	refunded_cents      bigint      NOT NULL DEFAULT 0,
	last_refund_id      text,
	created_at          timestamptz NOT NULL DEFAULT now(),
	updated_at          timestamptz NOT NULL DEFAULT now()
);`

type saleRequest struct {
	TransactionID string `json:"transaction_id"`
	AmountCents   int64  `json:"amount_cents"`
	Currency      string `json:"currency"`
	ClickID       string `json:"click_id"`
}

type refundRequest struct {
	TransactionID     string `json:"transaction_id"`
	RefundAmountCents int64  `json:"refund_amount_cents"`
	RefundID          string `json:"refund_id"`
}

type referenceServer struct {
	pool *pgxpool.Pool
}

// openReference opens a pool of maxConns connections to dsn's database and
// creates the reference's own schema; Close drops it. The floor shares the
// pool. Its statements are each served by a key, but a connection's plan
// is made once, while the tables are empty: a sequential scan, kept as
// they grow (the floor's completion read 28 million rows in one run,
// making the floor slower than the design allows). Without sequential
// scans, as the services' hot transactions run, the key serves them at
// any size.
func openReference(ctx context.Context, dsn string, maxConns int32) (*referenceServer, error) {
	pool, err := rig.OpenPool(ctx, dsn, maxConns, "benchsale-reference", map[string]string{"enable_seqscan": "off"})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	if _, err := pool.Exec(ctx, referenceDDL); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reference: create schema: %w", err)
	}
	return &referenceServer{pool: pool}, nil
}

// Close drops the reference's schema and closes the pool.
func (s *referenceServer) Close(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+referenceSchema+" CASCADE")
	s.pool.Close()
}

func (s *referenceServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/track/sale", s.sale)
	mux.HandleFunc("POST /api/v1/track/refund", s.refund)
	return mux
}

// decodeSale reads a sale body and checks its required fields, answering
// 400 when it cannot be used.
func decodeSale(w http.ResponseWriter, r *http.Request) (saleRequest, bool) {
	var req saleRequest
	if !decode(w, r, &req) {
		return req, false
	}
	if req.TransactionID == "" || req.AmountCents <= 0 || req.Currency == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "transaction_id, amount_cents and currency are required"})
		return req, false
	}
	return req, true
}

func (s *referenceServer) sale(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeSale(w, r)
	if !ok {
		return
	}
	var id int64
	err := s.pool.QueryRow(r.Context(),
		`INSERT INTO bench_sale_reference.sales (transaction_id, amount_cents, currency, click_id) VALUES ($1, $2, $3, $4) RETURNING id`,
		req.TransactionID, req.AmountCents, req.Currency, req.ClickID).Scan(&id)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		writeJSON(w, http.StatusConflict, map[string]any{"success": false, "error": "duplicate transaction_id"})
	case err != nil:
		internalError(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "sale_id": id})
	}
}

func (s *referenceServer) refund(w http.ResponseWriter, r *http.Request) {
	var req refundRequest
	if !decode(w, r, &req) {
		return
	}
	if req.TransactionID == "" || req.RefundAmountCents < 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "transaction_id is required"})
		return
	}
	var refunded, amount int64
	err := s.pool.QueryRow(r.Context(),
		`UPDATE bench_sale_reference.sales
		    SET refunded_cents = LEAST(amount_cents, refunded_cents + CASE WHEN $2 = 0 THEN amount_cents ELSE $2 END),
		        last_refund_id = $3, updated_at = now()
		  WHERE transaction_id = $1
		RETURNING refunded_cents, amount_cents`,
		req.TransactionID, req.RefundAmountCents, req.RefundID).Scan(&refunded, &amount)
	switch {
	case errors.Is(err, context.Canceled):
		return
	case errors.Is(err, pgx.ErrNoRows):
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "sale not found"})
	case err != nil:
		internalError(w, err)
	default:
		status := "refunded"
		if refunded >= amount {
			status = "reversed"
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "status": status})
	}
}

// internalError answers 500 naming the Postgres error code, so the report
// says why (a local benchmark: nothing to hide; e.g. 53300 too many
// clients).
func internalError(w http.ResponseWriter, err error) {
	msg := "internal error"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg += " (SQLSTATE " + pgErr.Code + ")"
	} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		msg += " (" + err.Error() + ")"
	} else {
		msg += ": " + err.Error()
	}
	writeJSON(w, http.StatusInternalServerError, map[string]any{"success": false, "error": msg})
}

// decode reads a JSON body into v, answering 400 on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Content-Type must be application/json"})
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Invalid JSON body"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
