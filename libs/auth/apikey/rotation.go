package apikey

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBuffered bounds the body kept to inject warnings; a larger body (an
// export, not an API answer) is passed through untouched.
const maxBuffered = 1 << 20

// Warning is one item of the top-level "warnings" array.
type Warning struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Hint     string `json:"hint"`
	RotateBy string `json:"rotate_by"`
	DocsURL  string `json:"docs_url"`
}

// RotationWarning is the warning sent with every response for a key marked
// for rotation.
func RotationWarning(key Key, docsURL string) Warning {
	var by string
	if key.RotationDeadline != nil {
		by = key.RotationDeadline.UTC().Format(time.RFC3339)
	}
	return Warning{
		Code:     CodeRotationRequired,
		Message:  "This API key is marked for rotation and stops working at " + by + ".",
		Hint:     "Create a new API key for this program in the dashboard, switch your integration to it before the deadline, then delete this one.",
		RotateBy: by,
		DocsURL:  docsURL,
	}
}

// RotationHeaders sets the rotation headers of the contract on h:
// Deprecation "@<unix seconds marked>", Sunset (HTTP-date of the deadline)
// and Link "<docs_url>; rel='deprecation'" (single quotes as the contract
// writes them). Deprecation is left out when the mark time is unknown.
func RotationHeaders(h http.Header, key Key, docsURL string) {
	if key.RotationMarkedAt != nil {
		h.Set("Deprecation", "@"+strconv.FormatInt(key.RotationMarkedAt.Unix(), 10))
	}
	if key.RotationDeadline != nil {
		h.Set("Sunset", key.RotationDeadline.UTC().Format(http.TimeFormat))
	}
	if docsURL != "" {
		h.Add("Link", "<"+docsURL+">; rel='deprecation'")
	}
}

// RotationWriter buffers a JSON response to add the rotation warning to its
// top-level object. Call Finish after the handler returns.
type RotationWriter struct {
	w       http.ResponseWriter
	warning Warning
	status  int
	buf     bytes.Buffer
	// passthrough: the body is streamed unchanged (flushed, hijacked, too
	// large); the status has been sent.
	passthrough bool
	finished    bool
}

// WithRotationWarnings returns a writer that sets the rotation headers now
// and, at Finish, adds {"warnings":[...]} to a JSON object body (a sibling
// of "data" when the payload is wrapped). Existing fields are kept as they
// are, in order; an existing "warnings" array is appended to. Bodies that
// are not a JSON object (other content types, arrays, invalid JSON, empty
// bodies, 204/304) go out unchanged. If the key is not rotating at now, w is
// wrapped but nothing is added.
func WithRotationWarnings(w http.ResponseWriter, key Key, now time.Time, docsURL string) *RotationWriter {
	rw := &RotationWriter{w: w}
	if !key.Rotating(now) {
		rw.passthrough = true
		return rw
	}
	RotationHeaders(w.Header(), key, docsURL)
	rw.warning = RotationWarning(key, docsURL)
	return rw
}

// Header returns the underlying header map.
func (rw *RotationWriter) Header() http.Header { return rw.w.Header() }

// WriteHeader records the status; it is sent at Finish.
func (rw *RotationWriter) WriteHeader(status int) {
	if rw.passthrough {
		if rw.status == 0 {
			rw.status = status
			rw.w.WriteHeader(status)
		}
		return
	}
	// Informational 1xx responses go out at once, as net/http does.
	if status >= 100 && status < 200 {
		rw.w.WriteHeader(status)
		return
	}
	if rw.status == 0 {
		rw.status = status
	}
}

// Write buffers the body, or streams it once buffering was given up.
func (rw *RotationWriter) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.passthrough {
		return rw.w.Write(p)
	}
	if rw.buf.Len()+len(p) > maxBuffered {
		if err := rw.giveUp(); err != nil {
			return 0, err
		}
		return rw.w.Write(p)
	}
	return rw.buf.Write(p)
}

// Flush gives up on injection: a handler that flushes streams, and the
// bytes already sent cannot be edited.
func (rw *RotationWriter) Flush() {
	if err := rw.giveUp(); err != nil {
		return
	}
	if f, ok := rw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over when the underlying writer allows it.
func (rw *RotationWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := rw.w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("rotation writer: underlying ResponseWriter is not a Hijacker")
	}
	rw.passthrough, rw.finished = true, true
	return h.Hijack()
}

func (rw *RotationWriter) giveUp() error {
	if rw.passthrough {
		return nil
	}
	rw.passthrough = true
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	rw.w.WriteHeader(rw.status)
	if _, err := rw.w.Write(rw.buf.Bytes()); err != nil {
		return fmt.Errorf("write buffered body: %w", err)
	}
	rw.buf.Reset()
	return nil
}

// Finish writes the status and the (possibly amended) body. It is
// idempotent.
func (rw *RotationWriter) Finish() error {
	if rw.finished {
		return nil
	}
	rw.finished = true
	if rw.passthrough {
		return nil
	}
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	body := rw.buf.Bytes()
	if bodyAllowed(rw.status) && isJSON(rw.w.Header().Get("Content-Type")) {
		if out, ok := injectWarning(body, rw.warning); ok {
			body = out
			// The handler's Content-Length, if any, counted the old body.
			rw.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	rw.w.WriteHeader(rw.status)
	if len(body) == 0 {
		return nil
	}
	if _, err := rw.w.Write(body); err != nil {
		return fmt.Errorf("write response with rotation warning: %w", err)
	}
	return nil
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && status >= 200
}

// isJSON accepts application/json and any +json type. An unset Content-Type
// is not JSON: net/http would sniff it, and guessing could corrupt a body.
func isJSON(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// injectWarning adds warning to the top-level object of body, keeping every
// member's bytes and order. It reports false when body is not one JSON
// object.
func injectWarning(body []byte, warning Warning) ([]byte, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, false
	}
	item, err := marshal(warning)
	if err != nil {
		return nil, false
	}

	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(len(body) + len(item) + 16)
	out.WriteByte('{')
	first, seen := true, false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, err := marshal(name)
		if err != nil {
			return nil, false
		}
		out.Write(k)
		out.WriteByte(':')
		if name == "warnings" && !seen {
			seen = true
			out.Write(appendToArray(raw, item))
			continue
		}
		out.Write(raw)
	}
	if !seen {
		if !first {
			out.WriteByte(',')
		}
		out.WriteString(`"warnings":[`)
		out.Write(item)
		out.WriteByte(']')
	}
	out.WriteByte('}')
	// Keep the handler's trailing newline (json.Encoder writes one).
	if tail := body[len(bytes.TrimRight(body, " \t\r\n")):]; len(tail) > 0 {
		out.Write(tail)
	}
	return out.Bytes(), true
}

// appendToArray appends item to a JSON array, or replaces a null; any other
// value is wrapped with item into a new array so no information is lost.
func appendToArray(raw json.RawMessage, item []byte) []byte {
	r := bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(r, []byte("null")):
		return append(append([]byte{'['}, item...), ']')
	case len(r) >= 2 && r[0] == '[':
		inner := bytes.TrimSpace(r[1 : len(r)-1])
		var b bytes.Buffer
		b.WriteByte('[')
		if len(inner) > 0 {
			b.Write(inner)
			b.WriteByte(',')
		}
		b.Write(item)
		b.WriteByte(']')
		return b.Bytes()
	}
	var b bytes.Buffer
	b.WriteByte('[')
	b.Write(r)
	b.WriteByte(',')
	b.Write(item)
	b.WriteByte(']')
	return b.Bytes()
}
