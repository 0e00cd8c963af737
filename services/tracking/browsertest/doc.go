// Package browsertest holds the real-browser test of the tracker (svc.js):
// browser_test.go runs accounts and tracking in-process and drives Debian's
// Chromium through tracker.spec.mjs (playwright-core). Nothing here is
// imported by the service.
package browsertest
