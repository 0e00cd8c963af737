// Package replica is tracking's copy of the accounts catalog: the programs,
// links, API keys and partner-program records tracking reads on every
// request, kept current by its consumer (replica/consumer) and read by the
// ingest store (ingest/pgstore) through a cache.
//
// The feature has no use cases of its own, so there is no Service here; what
// the two sides share is the change notification below.
package replica

// ChannelSuffix names the Postgres NOTIFY channel "<schema>_catalog": the
// consumer notifies it in the transaction that changes the replica, and
// every pod's catalog cache LISTENs on it and drops its entries.
const ChannelSuffix = "_catalog"

// Channel is the notification channel of the replica in schema.
func Channel(schema string) string { return schema + ChannelSuffix }
