// Package drills holds the whole-stack fault drills: every service of the
// stack in one process behind the local gateway, on a fresh database and an
// embedded broker that the drills stop and start (drill 1 of the "survive
// faults" issue, and the soak behind `make soak`). Tests only; the
// single-component drills live beside their code (libs/outbox, libs/platform,
// services/tracking).
package drills
