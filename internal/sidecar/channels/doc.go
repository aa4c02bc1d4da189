// Package channels is the durable-channel registry of the sidecar (durable channel
// contract 0.1.0) and its HTTP API; docs/channels.md is the contract.
//
// One registry per Durable Object instance (Key: namespace + object id) holds up to
// Limits.MaxChannels channels of up to Limits.MaxSubscribers subscribers each. Publish is
// totally ordered per channel and returns the subscribers reached; Wait long-polls one
// subscription with a timeout (0 polls) and answers message, timeout, closed(reason) or
// disconnected(reason); Close lets subscribers drain before they see closed; a subscriber
// whose backlog would exceed Limits.MaxBacklogBytes is disconnected with BacklogReason.
// SubscriberCount reads the registry (no probe frames).
//
// A registry lives while its object has a subscription and is freed after; at most
// Options.MaxObjects (DefaultMaxObjects) objects hold one at once (OBJECT_LIMIT).
//
// Handles are "<instanceToken>:<bootId>-<n>": instanceToken is 13 characters of a keyed
// hash of the object (a random key per run), in the form of a random UUID's (a handle
// shown to another instance is FOREIGN_HANDLE), bootId names the sidecar run (a handle of an earlier run, recorded under the data directory,
// is REGISTRY_RESTARTED). Subscriptions hold a lease (DefaultLease, configurable) renewed
// by subscribe and every wait; a lapsed lease is collected, so the channel quota cannot
// leak when a request ends without unsubscribing. Every error is an *Error with a stable
// Code.
package channels
