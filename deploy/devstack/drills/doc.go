// Package drills holds the whole-stack fault drills: the services of the
// stack behind the local gateway, on a fresh database and an embedded
// broker in a process of its own that the drills stop and start (drill 1 of
// the "survive faults" issue, and the soak behind `make soak`). The
// services run in the test's process, except one a drill kills: the
// webhooks drill runs webhooks in a child process (the test binary with
// DRILLS_SERVICE set), SIGKILLs it while a delivery attempt is in flight
// and starts it again (issue 22). Tests only; the single-component drills
// live beside their code (libs/outbox, libs/platform, services/tracking,
// services/webhooks/internal/delivery/pgstore).
package drills
