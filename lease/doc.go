// Package lease lets a server count limits and charge characters in memory
// while many servers share one store (docs/api.md, "Running several
// servers"; decisions: "A cluster as fast as one server").
//
// # Design
//
// Each server (a holder, named by a random id per process) holds, per
// active workspace:
//
//   - a share of its concurrency slots and of its realtime-session slots
//     (Manager's control.Limiter). A request takes a slot of the share
//     without a store call; when the share is used up the request asks the
//     store for more (one round trip, serialized per workspace so that a
//     burst shares it), growing the share by what the server used lately,
//     at most Config.SlotBatch beyond its use. The store grants no more
//     than the limit less every other holder's share (LeaseService), so the
//     slots in use across servers never exceed the limit. A share never
//     drops below the slots in use (streams running when a limit is lowered
//     stay counted until they end), and while a call that resizes a share
//     runs the server takes no slot beyond the smaller of the old and the
//     new share. Limits below
//     Config.ExactBelow get no headroom at all: a share is exactly the
//     slots in use, and a freed slot goes back within milliseconds, so a
//     small plan (Free: 2 streams) is shared exactly as before.
//   - a reservation of its characters (Manager's control.Meter, enforce
//     mode): a charge takes from it in memory; the store grants no more
//     than the balance less every other holder's reservation, so the
//     balance never goes below zero. Characters are counted as used when
//     synthesized: the server settles what it charged (by UTC day, so the
//     daily counter and the month's rollover see synthesized characters)
//     at every sync, in the same transaction that resizes the
//     reservation. X-Billing-Remaining is the balance less every
//     reservation, plus what this server still holds for the client: never
//     more than the client could spend. Metering (meter mode) reserves
//     nothing and settles the same way.
//
// A background loop syncs every Config.Sync: it settles usage, resizes
// shares to the recent peak (giving back what is not needed, everything
// once a workspace is idle for Config.Idle) and renews what it keeps, all
// with at most one store call per workspace and part, and one renewal for
// the rest. Shutdown (Close) settles and gives everything back at once.
//
// # Bounds
//
// Everything a holder holds expires Config.TTL after its last renewal, in
// the store's clock; the holder stops using it earlier, 9/10 of TTL after
// the renewal was sent, so a server that dies or is cut off loses at most
// its leases, for at most TTL. A store outage therefore degrades to the
// shares and reservations in hand, then to 503 store_unavailable, never to
// unlimited service. At any moment:
//
//   - concurrent streams across servers <= the limit (shares are counted
//     in the store); a share held by a server cut off from the store keeps
//     serving its own slots until it expires locally;
//   - characters charged but not yet settled <= the reservations held:
//     a server that dies loses (does not bill) at most its reservation
//     and the usage since its last sync;
//   - per server, slots held beyond use <= min(SlotBatch, limit/8), and a
//     reservation <= CharBatch.
//
// An admin change (plan, limits, billing, credits) arrives through the
// store's change feed within a second: the workspace's shares and
// reservation are marked stale, so its next request asks the store first,
// with the new limits, and the store shrinks the share.
//
// Request rates are counted by the exact per-request limiter given to New:
// the rps window is a sliding second that a batch cannot share without
// admitting a second burst; only plans with an rps limit pay that round
// trip.
package lease
