package apikey

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Envelope selects the error body shape of the contract.
type Envelope int

const (
	// EnvelopePlatform: {"data":null,"error":{"status","name","message","details","code"?}}.
	EnvelopePlatform Envelope = iota
	// EnvelopeTyped: {"error":{"code","message"}}.
	EnvelopeTyped
)

// Messages is the 401 table of one route family: the exact messages of the
// contract, the envelope, and error.code.
type Messages struct {
	// Missing answers a missing or malformed header.
	Missing string
	// Empty answers "Bearer" with no token.
	Empty string
	// Invalid answers a token matching no key (or a revoked key).
	Invalid  string
	Envelope Envelope
	// Code is error.code; omitted from a platform envelope when empty.
	Code string
	// Optional marks a family where no token means anonymous access (lead's
	// browser mode): missing and empty tokens are not rejected (a
	// malformed header still is).
	Optional bool
}

// Rejects reports whether outcome o must be answered with a 401 in this
// family. OutcomeError is not a rejection: it is a 500.
func (m Messages) Rejects(o Outcome) bool {
	switch o {
	case OutcomeMissing, OutcomeEmpty:
		return !m.Optional
	case OutcomeMalformed, OutcomeInvalid, OutcomeRetired:
		return true
	}
	return false
}

// The messages are constants and the families functions, not package
// variables, so no caller can change another's answers.
const (
	msgMissing      = "Missing or malformed Authorization header. Expected: Bearer <token>"
	msgEmpty        = "Missing API token"
	msgInvalid      = "Invalid API token"
	msgReadyMissing = "Missing or malformed Authorization header. Expected: Bearer <api_token>."
	msgReadyEmpty   = "Missing API token."
	msgReadyInvalid = "Invalid API token."

	// CodeRotationRequired is error.code of a retired key and the code of
	// rotation warnings.
	CodeRotationRequired = "api_key_rotation_required"

	msgRetired  = "This API key is past its rotation deadline and no longer works."
	hintRetired = "Create a new API key for this program in the dashboard and use it instead of this one."
)

// SaleMessages is POST /api/v1/track/sale: platform envelope, code
// "unauthorized".
func SaleMessages() Messages {
	return Messages{Missing: msgMissing, Empty: msgEmpty, Invalid: msgInvalid, Envelope: EnvelopePlatform, Code: "unauthorized"}
}

// RefundMessages is POST /api/v1/track/refund: as sale, but an empty token
// answers "Invalid API token".
func RefundMessages() Messages {
	return Messages{Missing: msgMissing, Empty: msgInvalid, Invalid: msgInvalid, Envelope: EnvelopePlatform, Code: "unauthorized"}
}

// ReadinessMessages is GET /api/v1/programs/me/readiness (and the other
// typed-envelope key routes): typed envelope, code "invalid_key", messages
// ending with a period.
func ReadinessMessages() Messages {
	return Messages{Missing: msgReadyMissing, Empty: msgReadyEmpty, Invalid: msgReadyInvalid, Envelope: EnvelopeTyped, Code: "invalid_key"}
}

// CLIMessages is CLI status and test-event: platform envelope, the sale
// messages, no code.
func CLIMessages() Messages {
	return Messages{Missing: msgMissing, Empty: msgEmpty, Invalid: msgInvalid, Envelope: EnvelopePlatform}
}

// LeadMessages is POST /api/v1/track/lead: no or empty token is browser
// mode; a token matching nothing is a platform 401 "Invalid API token".
func LeadMessages() Messages {
	return Messages{Missing: msgMissing, Empty: msgEmpty, Invalid: msgInvalid, Envelope: EnvelopePlatform, Optional: true}
}

type platformError struct {
	Status  int      `json:"status"`
	Name    string   `json:"name"`
	Message string   `json:"message"`
	Details struct{} `json:"details"`
	Code    string   `json:"code,omitempty"`
}

type platformBody struct {
	Data  *struct{}     `json:"data"`
	Error platformError `json:"error"`
}

type typedError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	DocsURL string `json:"docs_url,omitempty"`
}

type typedBody struct {
	Error typedError `json:"error"`
}

// WriteUnauthorized writes the 401 of family m for outcome o. A retired key
// gets the typed api_key_rotation_required envelope whatever the family; any
// other outcome that is not Missing or Empty gets the Invalid message, so a
// misuse fails closed.
func WriteUnauthorized(w http.ResponseWriter, m Messages, o Outcome, docsURL string) {
	// RFC 9110 requires a challenge on every 401; the contract's bodies are
	// unchanged by it.
	w.Header().Set("WWW-Authenticate", "Bearer")
	if o == OutcomeRetired {
		writeJSON(w, http.StatusUnauthorized, typedBody{Error: typedError{
			Code: CodeRotationRequired, Message: msgRetired, Hint: hintRetired, DocsURL: docsURL,
		}})
		return
	}
	msg := m.Invalid
	switch o {
	case OutcomeMissing, OutcomeMalformed:
		msg = m.Missing
	case OutcomeEmpty:
		msg = m.Empty
	}
	if m.Envelope == EnvelopeTyped {
		writeJSON(w, http.StatusUnauthorized, typedBody{Error: typedError{Code: m.Code, Message: msg}})
		return
	}
	writeJSON(w, http.StatusUnauthorized, platformBody{Error: platformError{
		Status: http.StatusUnauthorized, Name: "UnauthorizedError", Message: msg, Code: m.Code,
	}})
}

// marshal encodes without HTML escaping so "<token>" stays byte for byte.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		// Only our own fixed types reach here; they always encode.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeInternalError is the fallback 500 of Middleware: no error text, which
// may name hosts or queries, reaches the client.
func writeInternalError(w http.ResponseWriter, _ *http.Request, _ error) {
	writeJSON(w, http.StatusInternalServerError, platformBody{Error: platformError{
		Status: http.StatusInternalServerError, Name: "InternalServerError", Message: "Internal server error", Code: "internal_error",
	}})
}
