// Package security collects the tests of what a hostile page, tenant, pod or
// client could do to the product (issue 23's review): each test drives the
// real services through the local gateway, on a fresh database and an
// embedded broker, and asserts the answer and the rows written (and not
// written). Run them alone with
//
//	go test -race -count=1 ./e2e/security/
//
// README.md here lists every test of the review, including the few that
// live beside their service.
package security
