// Package httpapi is the accounts service's HTTP transport: the admin API
// under /admin/v1/, guarded by the admin token, in the platform envelope.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"
	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
)

// HeaderCatalogSeq names the catalog sequence a write was published under;
// GET /admin/v1/catalog/sync?seq=N waits for it.
const HeaderCatalogSeq = "X-Catalog-Seq"

// Config carries what the transport needs besides the endpoints.
type Config struct {
	AdminToken string
	Logger     *slog.Logger
	// Limit, when set, limits every admin route per token; it runs after the
	// token check, so only the admin token gets a bucket.
	Limit func(http.Handler) http.Handler
	// FailedAuth, when set, wraps the token check: a client IP whose 401s
	// used up its allowance is refused 429 before the token is compared, so
	// guessing the admin token is limited per IP.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists every admin route. The caller mounts them (with metrics per
// route name) on its mux.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	enc := httperr.Route{FieldDetails: true, Logger: cfg.Logger, FailureLog: "admin request failed"}
	opts := []kithttp.ServerOption{
		kithttp.ServerErrorEncoder(enc.Failure),
	}
	created := encodeResponse(http.StatusCreated, enc)
	ok := encodeResponse(http.StatusOK, enc)
	guard := bearer.AdminGuard(cfg.AdminToken, cfg.Limit, cfg.FailedAuth)
	h := func(e func(ctx context.Context, req any) (any, error), dec kithttp.DecodeRequestFunc, enc kithttp.EncodeResponseFunc) http.Handler {
		// Query values (email, code) reach the database: refuse NUL first.
		h := http.Handler(kithttp.NewServer(e, httpkit.RefuseNULQuery(dec), enc, opts...))
		return guard(h)
	}
	return []httpkit.Route{
		{Pattern: "POST /admin/v1/advertisers", Name: "admin_create_advertiser", Handler: h(set.CreateAdvertiser, decodeAdvertiser, created)},
		{Pattern: "POST /admin/v1/users", Name: "admin_create_user", Handler: h(set.CreateUser, decodeUser, created)},
		{Pattern: "POST /admin/v1/programs", Name: "admin_create_program", Handler: h(set.CreateProgram, decodeCreateProgram, created)},
		{Pattern: "GET /admin/v1/users", Name: "admin_find_user", Handler: h(set.FindUser, decodeFindUser, ok)},
		{Pattern: "PATCH /admin/v1/users/{id}", Name: "admin_set_user_blocked", Handler: h(set.SetUserBlocked, decodeSetUserBlocked, ok)},
		{Pattern: "GET /admin/v1/programs", Name: "admin_list_programs", Handler: h(set.ListPrograms, decodeListPrograms, ok)},
		{Pattern: "GET /admin/v1/programs/{id}", Name: "admin_get_program", Handler: h(set.GetProgram, decodeGetProgram, ok)},
		{Pattern: "GET /admin/v1/programs/{id}/links", Name: "admin_list_links", Handler: h(set.ListLinks, decodeListLinks, ok)},
		{Pattern: "GET /admin/v1/programs/{id}/keys", Name: "admin_list_keys", Handler: h(set.ListKeys, decodeListKeys, ok)},
		{Pattern: "GET /admin/v1/partners", Name: "admin_find_partners", Handler: h(set.FindPartners, decodeFindPartners, ok)},
		{Pattern: "PATCH /admin/v1/programs/{id}", Name: "admin_update_program", Handler: h(set.UpdateProgram, decodeUpdateProgram, ok)},
		{Pattern: "POST /admin/v1/programs/{id}/members", Name: "admin_put_member", Handler: h(set.PutMember, decodeMember, created)},
		{Pattern: "POST /admin/v1/programs/{id}/keys", Name: "admin_issue_key", Handler: h(set.IssueKey, decodeIssueKey, created)},
		{Pattern: "POST /admin/v1/keys/{id}/rotation", Name: "admin_rotate_key", Handler: h(set.RotateKey, decodeRotateKey, ok)},
		{Pattern: "POST /admin/v1/partners", Name: "admin_create_partner", Handler: h(set.CreatePartner, decodePartner, created)},
		{Pattern: "POST /admin/v1/programs/{id}/partners", Name: "admin_add_partner", Handler: h(set.AddPartnerToProgram, decodeAddPartner, created)},
		{Pattern: "POST /admin/v1/programs/{id}/links", Name: "admin_create_link", Handler: h(set.CreateLink, decodeCreateLink, created)},
		{Pattern: "PATCH /admin/v1/links/{id}", Name: "admin_set_link_active", Handler: h(set.SetLinkActive, decodeSetLinkActive, ok)},
		{Pattern: "POST /admin/v1/sessions", Name: "admin_issue_session", Handler: h(set.IssueSession, decodeSession, created)},
		{Pattern: "GET /admin/v1/catalog/sync", Name: "admin_catalog_sync", Handler: h(set.WaitForSync, decodeSync, ok)},
	}
}

// answer is every admin endpoint's response (an endpoints.Response[T]).
type answer interface {
	endpoint.Failer
	CatalogSeq() catalog.Seq
}

func encodeResponse(status int, enc httperr.Route) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(answer)
		if err := r.Failed(); err != nil {
			enc.Refusal(ctx, err, w)
			return nil
		}
		if seq := r.CatalogSeq(); seq > 0 {
			w.Header().Set(HeaderCatalogSeq, strconv.FormatInt(int64(seq), 10))
		}
		return httpkit.WriteJSON(w, status, r)
	}
}
