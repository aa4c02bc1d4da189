// Package cronschedule fires CronSchedules.
//
// Dispatcher is a controller-runtime manager.Runnable (leader election required) that
// fires every CronSchedule: for each due slot it first claims the slot by writing
// status.schedules[].lastScheduleTime with optimistic concurrency, then calls one ready
// pod's trigger socket (POST http://<podIP>:<trigger port>/scheduled,
// docs/pod-contract.md), and records the outcome in status.history, in Events and in
// Prometheus metrics. The history writes of finished runs wait until the current pass
// has made its claims, so at a busy minute boundary the claims, which gate the
// dispatches, have the API server to themselves. A leader killed mid-minute is replaced
// within the Lease duration, and each slot is still dispatched once
// (TestExactlyOnceAcrossLeaderFailover: two manager processes, the leader SIGKILLed);
// startingDeadlineSeconds lets the new leader catch up a slot that passed during the
// takeover. A Workflow target gets an instance per slot through EngineStarter.
//
// The expressions are parsed by internal/cron; docs/cron.md describes the dispatch.
package cronschedule
