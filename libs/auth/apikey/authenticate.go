package apikey

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// DefaultDocsURL is the key rotation documentation every service that
// authenticates program keys points integrators at unless API_KEY_DOCS_URL
// says otherwise.
const DefaultDocsURL = "https://docs.svc.dev/api-keys/rotation"

// Outcome is the result of authenticating a request.
type Outcome int

const (
	// OutcomeMissing: no Authorization header (or an empty one).
	OutcomeMissing Outcome = iota
	// OutcomeEmpty: "Bearer" with no token.
	OutcomeEmpty
	// OutcomeInvalid: the token matches no key, or the key is revoked.
	OutcomeInvalid
	// OutcomeRetired: the key is past its rotation deadline.
	OutcomeRetired
	// OutcomeRotating: the key works but is marked for rotation; responses
	// must carry the rotation signals (see WithRotationWarnings).
	OutcomeRotating
	// OutcomeOK: the key works.
	OutcomeOK
	// OutcomeError: the store failed; answer 500, not 401.
	OutcomeError
	// OutcomeMalformed: an Authorization header that does not start with
	// "Bearer " (the contract's Authentication rule 3: a 401 on every
	// family, lead's browser mode included).
	OutcomeMalformed
)

func (o Outcome) String() string {
	switch o {
	case OutcomeMissing:
		return "missing"
	case OutcomeEmpty:
		return "empty"
	case OutcomeInvalid:
		return "invalid"
	case OutcomeRetired:
		return "retired"
	case OutcomeRotating:
		return "rotating"
	case OutcomeOK:
		return "ok"
	case OutcomeError:
		return "error"
	case OutcomeMalformed:
		return "malformed"
	}
	return "unknown"
}

// Authenticated reports whether the request carries a working key.
func (o Outcome) Authenticated() bool { return o == OutcomeOK || o == OutcomeRotating }

// Anonymous reports whether the request carries no token at all (lead's
// browser mode).
func (o Outcome) Anonymous() bool { return o == OutcomeMissing || o == OutcomeEmpty }

// Authenticator authenticates program API keys.
type Authenticator struct {
	Store Store
	// Now is the clock that decides rotation; time.Now when nil.
	Now func() time.Time
	// DocsURL is the key rotation documentation (API_KEY_DOCS_URL, by
	// default DefaultDocsURL), sent in docs_url and the
	// Link header.
	DocsURL string
	// OnLookup, when set, is called once per store lookup with its outcome
	// (OutcomeOK, OutcomeRotating, OutcomeRetired, OutcomeInvalid or
	// OutcomeError; never Missing or Empty, which look nothing up), e.g. to
	// count apikey_lookups_total{outcome}. A request refused before
	// authentication (a failed-auth limit) never calls it.
	OnLookup func(Outcome)
	// Uses, when set, records every key that authenticated (OutcomeOK or
	// OutcomeRotating) for the service's last-use reports.
	Uses *Uses
}

func (a *Authenticator) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

// Authenticate reads the Authorization header of r. err is non-nil only
// with OutcomeError (store failure). The key is returned for
// OutcomeOK, OutcomeRotating and OutcomeRetired (so a retired key's program
// can be logged); otherwise it is the zero Key.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Key, Outcome, error) {
	return a.AuthenticateHeader(ctx, r.Header.Get("Authorization"))
}

// AuthenticateHeader is Authenticate for an Authorization header value.
func (a *Authenticator) AuthenticateHeader(ctx context.Context, header string) (Key, Outcome, error) {
	token, res := ParseBearer(header)
	switch {
	case res == ParseMissing && header != "":
		return Key{}, OutcomeMalformed, nil
	case res == ParseMissing:
		return Key{}, OutcomeMissing, nil
	case res == ParseEmpty:
		return Key{}, OutcomeEmpty, nil
	}
	if len(token) > maxTokenLen {
		return Key{}, OutcomeInvalid, nil
	}
	key, outcome, err := a.lookup(ctx, token)
	if a.OnLookup != nil {
		a.OnLookup(outcome)
	}
	if a.Uses != nil && outcome.Authenticated() {
		a.Uses.Record(key, a.now())
	}
	return key, outcome, err
}

func (a *Authenticator) lookup(ctx context.Context, token string) (Key, Outcome, error) {
	// The lookup is by hash, so response timing reveals nothing about how
	// close a guess is to a real key; no constant-time compare is needed.
	key, err := a.Store.LookupKeyByHash(ctx, Hash(token))
	if errors.Is(err, ErrKeyNotFound) {
		return Key{}, OutcomeInvalid, nil
	}
	if err != nil {
		return Key{}, OutcomeError, fmt.Errorf("look up api key: %w", err)
	}
	if key.Revoked {
		return Key{}, OutcomeInvalid, nil
	}
	now := a.now()
	switch {
	case key.Retired(now):
		return key, OutcomeRetired, nil
	case key.Rotating(now):
		return key, OutcomeRotating, nil
	}
	return key, OutcomeOK, nil
}

// Middleware authenticates every request with the rules of family m:
//   - a rejected request (m.Rejects) gets WriteUnauthorized and stops;
//   - a store failure calls onError, which writes the family's 500 (nil
//     means a bare platform-envelope 500 with no internal text);
//   - an authenticated request continues with the key in its context
//     (KeyFrom) and, for a key marked for rotation, the rotation headers
//     and body warnings;
//   - an anonymous request on an Optional family (lead) continues with no
//     key in its context.
func (a *Authenticator) Middleware(m Messages, onError func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	if onError == nil {
		onError = writeInternalError
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, outcome, err := a.Authenticate(r.Context(), r)
			switch {
			case err != nil:
				onError(w, r, err)
				return
			case m.Rejects(outcome):
				a.WriteUnauthorized(w, m, outcome)
				return
			case !outcome.Authenticated():
				next.ServeHTTP(w, r)
				return
			}
			r = r.WithContext(WithKey(r.Context(), key))
			if outcome != OutcomeRotating {
				next.ServeHTTP(w, r)
				return
			}
			rw := WithRotationWarnings(w, key, a.now(), a.DocsURL)
			next.ServeHTTP(rw, r)
			// The status and headers are already decided; a failed write
			// means the client went away, nothing left to answer.
			_ = rw.Finish()
		})
	}
}

// WriteUnauthorized writes the 401 of family m for outcome o, with
// a.DocsURL for a retired key.
func (a *Authenticator) WriteUnauthorized(w http.ResponseWriter, m Messages, o Outcome) {
	WriteUnauthorized(w, m, o, a.DocsURL)
}
