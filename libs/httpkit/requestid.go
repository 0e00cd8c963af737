package httpkit

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
)

// HeaderRequestID is the request id header, read and written.
const HeaderRequestID = "X-Request-ID"

// maxRequestIDLen bounds incoming ids so a client cannot make us echo and log
// arbitrarily long values.
const maxRequestIDLen = 128

type requestIDKey struct{}

// requestIDState is shared by the middleware and the handler through the
// request context, so a handler deep in the chain can opt out of the header
// even when other middlewares wrapped the ResponseWriter.
type requestIDState struct {
	id      string
	omitAll atomic.Bool
	omitIf  atomic.Pointer[func(status int) bool]
}

func (s *requestIDState) omit(status int) bool {
	if s.omitAll.Load() {
		return true
	}
	if f := s.omitIf.Load(); f != nil {
		return (*f)(status)
	}
	return false
}

// ValidRequestID reports whether an incoming id is kept as is:
// 1 to 128 characters of [A-Za-z0-9._:-].
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// NewRequestID returns a random 128-bit id as 32 lowercase hex characters.
func NewRequestID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestID is middleware that keeps a well-formed incoming X-Request-ID or
// generates one, stores it in the request context (RequestIDFrom) and sets it
// on the response. The header is decided when the status is written, so a
// handler may still suppress it with OmitRequestID. Place it outermost so
// responses written by later middlewares (rate limiting, auth) carry it.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !ValidRequestID(id) {
			id = NewRequestID()
		}
		st := &requestIDState{id: id}
		rw := &requestIDWriter{ResponseWriter: w, st: st}
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, st)))
		// A handler that wrote nothing still gets its implicit 200 from
		// net/http; write it here so the header decision applies to it too.
		if !rw.wroteHeader && !rw.hijacked {
			rw.WriteHeader(http.StatusOK)
		}
	})
}

// RequestIDFrom returns the request id stored by RequestID, or "" outside it.
// Loggers read it from here to add request_id to records.
func RequestIDFrom(ctx context.Context) string {
	if st, ok := ctx.Value(requestIDKey{}).(*requestIDState); ok {
		return st.id
	}
	return ""
}

// OmitRequestID suppresses the X-Request-ID header on this request's response
// (the CLI GET status route answers 200 and 401 without it). It must be called
// before the status is written. It reports false when the request did not
// pass through RequestID.
func OmitRequestID(ctx context.Context) bool {
	st, ok := ctx.Value(requestIDKey{}).(*requestIDState)
	if ok {
		st.omitAll.Store(true)
	}
	return ok
}

// OmitRequestIDWhen is middleware, placed inside RequestID, that suppresses
// the header on responses whose status matches omit: for the CLI GET status
// route, OmitRequestIDWhen(func(s int) bool { return s < 500 }) keeps the id
// on 500 only, including 429s written by a rate limiter placed inside it.
func OmitRequestIDWhen(omit func(status int) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if st, ok := r.Context().Value(requestIDKey{}).(*requestIDState); ok {
				st.omitIf.Store(&omit)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requestIDWriter sets or removes the header when the status is written.
type requestIDWriter struct {
	http.ResponseWriter
	st          *requestIDState
	wroteHeader bool
	hijacked    bool
}

func (w *requestIDWriter) WriteHeader(status int) {
	if w.wroteHeader {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	// 1xx responses are informational; the final status decides.
	if status >= 200 {
		w.wroteHeader = true
		if w.st.omit(status) {
			w.Header().Del(HeaderRequestID)
		} else {
			w.Header().Set(HeaderRequestID, w.st.id)
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *requestIDWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer's
// deadlines and flushing.
func (w *requestIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps streaming handlers working through type assertions.
func (w *requestIDWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack passes connection takeover through; the id header is then moot.
func (w *requestIDWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	w.hijacked = true
	return conn, buf, nil
}
