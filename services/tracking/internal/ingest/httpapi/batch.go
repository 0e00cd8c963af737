package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/svc-dev/svc/libs/httpkit"
)

// AttributionsBatchPath takes several attribution requests in one call
// (commissions' concurrent sales): each is decided exactly as
// AttributionsPath decides it alone, and answered with the status and body
// that route would have answered.
const AttributionsBatchPath = AttributionsPath + "/batch"

// MaxBatch is the most requests one batch carries.
const MaxBatch = 64

// maxBatchBody bounds a batch body: MaxBatch requests of the single
// route's size.
const maxBatchBody = MaxBatch * httpkit.DefaultBodyLimit

// The batch's own refusals (its requests' are their own answers).
const (
	msgBatchRequests = "requests is required: an array of 1 to 64 attribution requests"
)

// batchAnswer is one request's answer in a batch: the single route's
// status and body.
type batchAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// batchAttributions serves a batch by handing each request to single (the
// single route's handler, behind the batch's own guard), all at once, so
// that they join one group commit as concurrent calls do; it answers 200
// with their answers in order, or 400 when the batch itself is unusable.
func batchAttributions(single http.Handler, ee errorEncoder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not DecodeObject: its checks of the content (a NUL anywhere, say)
		// would refuse every request for one's fault; the single route
		// makes them on each.
		body, err := httpkit.ReadJSONBody(r, maxBatchBody)
		if err != nil {
			ee.encode(r.Context(), err, w)
			return
		}
		var batch struct {
			Requests []json.RawMessage `json:"requests"`
		}
		if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &batch) != nil || len(batch.Requests) == 0 || len(batch.Requests) > MaxBatch {
			ee.encode(r.Context(), invalid(msgBatchRequests), w)
			return
		}
		items := batch.Requests
		answers := make([]batchAnswer, len(items))
		var wg sync.WaitGroup
		for i, item := range items {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, AttributionsPath, bytes.NewReader(item))
				if err != nil {
					answers[i] = batchAnswer{Status: http.StatusInternalServerError}
					return
				}
				req.Header.Set("Content-Type", "application/json")
				rec := &recorder{header: http.Header{}}
				single.ServeHTTP(rec, req)
				answers[i] = batchAnswer{Status: rec.status, Body: rec.body.Bytes()}
			})
		}
		wg.Wait()
		for i, a := range answers {
			if a.Status == 0 || len(a.Body) == 0 || !json.Valid(a.Body) {
				// Never an answer outside the contract: the route's 500.
				body, _ := httpkit.PlatformBody(http.StatusInternalServerError, attributionErrors.failMsg, httpkit.WithCode(codeInternal))
				answers[i] = batchAnswer{Status: http.StatusInternalServerError, Body: body}
			}
		}
		_ = httpkit.WriteJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"results": answers}})
	})
}

// recorder is the ResponseWriter a batch's request is answered into.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
