package httpkit_test

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

// FuzzRequestFraming feeds raw HTTP/1.1 requests (request line, headers,
// body framing: chunk sizes, extensions, trailers, Content-Length) through
// net/http's parser to a route as the platform wraps it (OutliveHangup,
// ValidURL) that decodes a JSON object: whatever the bytes, the answer is
// never a 5xx (issue 23, "bad input is never a 5xx"). Its seeds run in
// `go test`; the gateway-level fuzz through the real services is
// e2e/security's TestFuzzNoServerErrors.
func FuzzRequestFraming(f *testing.F) {
	for _, seed := range []string{
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{\"a\":1}\r\n0\r\n\r\n",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n-1\r\n:1}\r\n0\r\n\r\n",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7;\xff=\x00\r\n{\"a\":1}\r\n0\r\nX-T\xff: \x00\r\n\r\n",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"a\":1}",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n",
		"POST /r?q=%FF HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; charset=\xff\r\nUser-Agent: \xff\r\nContent-Length: 14\r\n\r\n{\"a\":\"\\u0000\"}",
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}",
	} {
		f.Add([]byte(seed))
	}
	route := httpkit.OutliveHangup(httpkit.ValidURL(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpkit.DecodeObject(r, 1<<10); err != nil {
			status := http.StatusInternalServerError // any error but a refusal of the body
			var de *httpkit.DecodeError
			if errors.As(err, &de) {
				status = de.Status
			}
			_ = httpkit.WritePlatformError(w, status, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
	}), nil), 0)
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return // net/http answers these itself, with a 4xx (or 501 for a transfer coding it does not know)
		}
		rec := httptest.NewRecorder()
		route.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", raw, rec.Code, rec.Body)
		}
	})
}
