// Package openapivalidate checks live requests and responses against svc's
// OpenAPI 3.1 document (package api), so tests of the services and of the
// local stack can assert that what is served is what is documented.
package openapivalidate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/svc-dev/svc/api"
)

// Validator checks requests and responses against the document.
// It is safe for concurrent use.
type Validator struct {
	v validator.Validator
	// webhooks are the request body schemas of the document's `webhooks:`
	// section (the events svc sends to brands), by event type.
	webhooks map[string]*base.Schema
	schemas  schema_validation.SchemaValidator
}

// NewValidator parses the embedded document as OpenAPI 3.1, checks it
// against the OpenAPI 3.1 schema and builds the validator. A document that
// is not valid is an error listing every problem.
func NewValidator() (*Validator, error) { return newValidator(api.YAML()) }

func newValidator(spec []byte) (*Validator, error) {
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, &datamodel.DocumentConfiguration{})
	if err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	if info := doc.GetSpecInfo(); info.SpecFormat != datamodel.OAS31 || info.Version != "3.1.0" {
		return nil, fmt.Errorf("openapi.yaml is OpenAPI %q (%s), want 3.1.0", info.Version, info.SpecFormat)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("build openapi.yaml model: %w", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, failure("openapi.yaml is not a valid OpenAPI 3.1 document", verrs)
	}
	hooks, err := webhookSchemas(doc)
	if err != nil {
		return nil, err
	}
	return &Validator{v: v, webhooks: hooks, schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions())}, nil
}

// webhookSchemas reads the `webhooks:` section: each event type's POST
// body schema (application/json).
func webhookSchemas(doc libopenapi.Document) (map[string]*base.Schema, error) {
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build openapi.yaml model: %w", err)
	}
	out := map[string]*base.Schema{}
	if model.Model.Webhooks == nil {
		return out, nil
	}
	for name, item := range model.Model.Webhooks.FromOldest() {
		if item.Post == nil || item.Post.RequestBody == nil {
			return nil, fmt.Errorf("openapi.yaml: webhook %s has no POST body", name)
		}
		mt, ok := item.Post.RequestBody.Content.Get("application/json")
		if !ok || mt.Schema == nil {
			return nil, fmt.Errorf("openapi.yaml: webhook %s has no application/json schema", name)
		}
		s, err := mt.Schema.BuildSchema()
		if err != nil {
			return nil, fmt.Errorf("openapi.yaml: webhook %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// WebhookTypes lists the event types the document's `webhooks:` section
// describes.
func (v *Validator) WebhookTypes() []string {
	out := make([]string, 0, len(v.webhooks))
	for t := range v.webhooks {
		out = append(out, t)
	}
	return out
}

// ValidateWebhook checks body, a webhook svc sent, against the document's
// `webhooks:` schema of its type.
func (v *Validator) ValidateWebhook(typ string, body []byte) error {
	s, ok := v.webhooks[typ]
	if !ok {
		return fmt.Errorf("openapi.yaml describes no webhook %q", typ)
	}
	if ok, errs := v.schemas.ValidateSchemaBytes(s, body); !ok {
		return failure(fmt.Sprintf("webhook %s does not match openapi.yaml: %s", typ, body), errs)
	}
	return nil
}

// ValidateRequest checks req (path, method, parameters, security
// requirements and body) against the document. The body stays readable.
func (v *Validator) ValidateRequest(req *http.Request) error {
	restore, err := bufferRequest(req)
	if err != nil {
		return err
	}
	defer restore()
	if ok, errs := v.v.ValidateHttpRequestSync(req); !ok {
		return failure(fmt.Sprintf("request %s %s does not match the document", req.Method, req.URL.Path), errs)
	}
	return nil
}

// ValidateResponse checks resp (status, required headers and their values,
// content type and body) against the operation req was sent to. A route,
// method or status the document does not list is a failure. The body of
// resp (and of req) stays readable afterwards.
func (v *Validator) ValidateResponse(req *http.Request, resp *http.Response) error {
	if resp == nil {
		return errors.New("no response to validate")
	}
	restoreReq, err := bufferRequest(req)
	if err != nil {
		return err
	}
	defer restoreReq()
	var body []byte
	if resp.Body != nil && resp.Body != http.NoBody {
		body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return fmt.Errorf("read response body: %w", err)
		}
	}
	restore := func() { resp.Body = io.NopCloser(bytes.NewReader(body)) }
	restore()
	defer restore()
	if ok, errs := v.v.ValidateHttpResponse(req, resp); !ok {
		return failure(fmt.Sprintf("response %d to %s %s does not match the document", resp.StatusCode, req.Method, req.URL.Path), errs)
	}
	return nil
}

// bufferRequest reads req's body into memory so validation can consume it,
// and returns a function that puts a fresh reader back.
func bufferRequest(req *http.Request) (func(), error) {
	if req == nil {
		return nil, errors.New("no request to validate")
	}
	if req.Body == nil || req.Body == http.NoBody {
		return func() {}, nil
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	restore := func() { req.Body = io.NopCloser(bytes.NewReader(body)) }
	restore()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return restore, nil
}

// ValidationError lists every failure of one validation.
type ValidationError struct {
	Summary  string
	Failures []string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(e.Summary)
	b.WriteByte(':')
	for _, f := range e.Failures {
		b.WriteString("\n  - ")
		b.WriteString(f)
	}
	return b.String()
}

func failure(summary string, errs []*verrors.ValidationError) error {
	out := &ValidationError{Summary: summary}
	for _, e := range errs {
		if e == nil {
			continue
		}
		line := e.Message
		if e.Reason != "" && e.Reason != e.Message {
			line += ": " + e.Reason
		}
		if e.SpecLine > 1 {
			line += fmt.Sprintf(" (openapi.yaml line %d)", e.SpecLine)
		}
		out.Failures = append(out.Failures, line)
		for _, s := range e.SchemaValidationErrors {
			if s == nil {
				continue
			}
			at := s.FieldPath
			if at == "" {
				at = "$"
			}
			out.Failures = append(out.Failures, "    "+at+": "+s.Reason)
		}
	}
	if len(out.Failures) == 0 {
		out.Failures = []string{"no details given by the validator"}
	}
	return out
}
