package e2e

import (
	"net/http"
	"sync"
	"testing"

	"github.com/svc-dev/svc/api/openapivalidate"
)

var (
	validatorOnce sync.Once
	validator     *openapivalidate.Validator
	validatorErr  error
)

// validateAgainstOpenAPI checks a live answer against api/openapi.yaml:
// every answer the suite gets must be one the document describes (route,
// status, headers, body), so the document cannot drift from the services.
func validateAgainstOpenAPI(t *testing.T, req *http.Request, resp *http.Response) {
	t.Helper()
	validatorOnce.Do(func() { validator, validatorErr = openapivalidate.NewValidator() })
	if validatorErr != nil {
		t.Fatalf("api/openapi.yaml: %v", validatorErr)
	}
	if isAdmin(req) {
		return // the admin API is in-cluster only and not in the public document
	}
	if err := validator.ValidateResponse(req, resp); err != nil {
		t.Errorf("%v", err)
	}
}

func isAdmin(req *http.Request) bool {
	return len(req.URL.Path) >= 10 && req.URL.Path[:10] == "/admin/v1/"
}
