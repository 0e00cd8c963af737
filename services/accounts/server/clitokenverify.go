package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
)

// CLITokenVerifyPath lets another service (webhooks' listen) accept a CLI
// login token: accounts alone holds the tokens' hashes. An ops-port route
// (platform serves /internal/ there), never on the Ingress.
const CLITokenVerifyPath = "/internal/v1/cli-tokens/verify"

// msgCLITokenUnknown is the one answer for every token that does not
// authenticate (unknown, expired, revoked, blocked user), so the caller
// learns nothing about which.
const msgCLITokenUnknown = "Login token not valid"

// maxVerifyBody bounds the request: a token is under 128 bytes.
const maxVerifyBody = 1 << 10

// cliTokenVerifyRoute answers {token} with the user it belongs to. The token
// is never logged nor echoed.
func cliTokenVerifyRoute(cli cliauth.Service, internalToken string, logger *slog.Logger) platform.Route {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Token string `json:"token"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxVerifyBody)).Decode(&in); err != nil || in.Token == "" {
			_ = httpkit.WritePlatformError(w, http.StatusBadRequest, "Body must be {\"token\": string}", httpkit.WithCode("invalid_request"))
			return
		}
		u, err := cli.Authenticate(r.Context(), in.Token)
		if err != nil {
			if errors.Is(err, errkind.Unauthenticated) || errors.Is(err, errkind.Forbidden) || errors.Is(err, errkind.NotFound) {
				_ = httpkit.WritePlatformError(w, http.StatusNotFound, msgCLITokenUnknown, httpkit.WithCode("not_found"))
				return
			}
			logger.ErrorContext(r.Context(), "verify cli token", "err", err)
			_ = httpkit.WriteServerErrorWithRequestID(r.Context(), w, "Internal server error")
			return
		}
		_ = httpkit.WriteJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"user_id": u.ID}})
	})
	return platform.Route{Pattern: "POST " + CLITokenVerifyPath, Name: "internal_cli_token_verify", Handler: bearer.InternalGuard(bearer.New(internalToken), h)}
}
