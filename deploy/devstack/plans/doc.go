// Package plans holds the plan test (plans_test.go), in `make test`: the
// services' migrations run and their large tables get 100,000 rows each
// (load_test.go), then the whole stack runs in-process and the click,
// lead, visit, config, sale, refund, processor webhook, admin sale and
// commission reads and dashboard routes are driven through the gateway,
// with the console's webhook routes (webhooks_test.go: endpoints created,
// listed, edited, rotated, pinged and deleted, the delivery log paged and
// filtered, deliveries retried) and `svc listen`'s (start, poll, stop),
// while the dispatcher delivers every event those routes cause to a
// receiver answering 200 and one answering 500 (retried, then disabled).
// Every statement the services run is recorded with its arguments
// (platform.WithQueryTracer). Each recorded statement of tracking,
// commissions, analytics, accounts (the console's) and webhooks is then
// EXPLAINed in its schema with the arguments it ran with. A sequential
// scan of a large table, an index scan whose condition leaves the index's
// leading column free (Postgres 15 has no skip scan: a full index scan),
// a partial index read whole (no condition) unless the index is listed as
// small or the statement as reading it whole on purpose (smallPartial,
// wholeReads: the test's few rows in such an index hide a scan that grows
// with a backlog), or a read of a table the test leaves empty and does not
// list as bounded, fails the test and names the statement. A statement added to a driven route is checked as soon as the
// route runs it: there is no list to keep. A new route is added to
// client.drive.
//
// PLANS_REPORT=1 logs every statement with what its plan reads (go test
// -v); PLANS_DEBUG=1 prints the load's timings.
package plans
