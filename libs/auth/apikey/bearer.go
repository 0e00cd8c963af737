package apikey

import "strings"

// ParseResult classifies an Authorization header.
type ParseResult int

const (
	// ParseMissing: no header, or one that does not start with "Bearer ".
	ParseMissing ParseResult = iota
	// ParseEmpty: "Bearer " followed by nothing but whitespace.
	ParseEmpty
	// ParseOK: a non-empty token follows "Bearer ".
	ParseOK
)

func (p ParseResult) String() string {
	switch p {
	case ParseMissing:
		return "missing"
	case ParseEmpty:
		return "empty"
	case ParseOK:
		return "ok"
	}
	return "unknown"
}

const bearerPrefix = "Bearer "

// ParseBearer extracts the token of an Authorization header. The scheme is
// matched exactly as the contract writes it ("Bearer ", capital B, one
// space); surrounding whitespace of the token is dropped.
//
// The bare value "Bearer" counts as an empty token, not a malformed header:
// HTTP servers strip trailing whitespace from field values (RFC 9110 §5.5),
// so a client sending "Bearer " with an empty variable arrives as "Bearer",
// and "Missing API token" is the answer that tells it what is wrong.
func ParseBearer(header string) (token string, res ParseResult) {
	if header == "Bearer" {
		return "", ParseEmpty
	}
	if !strings.HasPrefix(header, bearerPrefix) {
		return "", ParseMissing
	}
	token = strings.TrimSpace(header[len(bearerPrefix):])
	if token == "" {
		return "", ParseEmpty
	}
	return token, ParseOK
}
