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
//   - a share of its rps window (rate.go): a number of requests it admits
//     in memory within Config.RPSFor of asking for it. The store records a
//     share in the workspace's sliding one-second window as that many
//     requests admitted at the grant (the window of servers that count
//     requests one by one, so both count each other) and grants no more
//     than the window has left: a burst cannot use a window twice. The
//     unused part goes back into the window with the next ask. A share
//     starts at 1 and doubles while it is used up within its time (halves
//     when most of it expires), up to min(RPSBatch, rps/8). Once the store
//     grants nothing, requests are refused in memory until the window
//     admits one more. rps limits below Config.ExactBelow (Free: 2) are
//     counted exactly by the per-request limiter given to New
//     (Deps.Rates); rps 0 costs nothing.
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
//     reservation <= CharBatch;
//   - requests admitted across servers in any one second <= the rps limit
//     plus the rps shares held at its start (each <= min(RPSBatch,
//     rps/8)): a share is counted in the window from its grant, and used
//     only within RPSFor after it was asked for (before the grant), so
//     the requests of a share granted before the second began are the
//     only ones the window no longer counts. Exact below ExactBelow.
//
// An admin change (plan, limits, billing, credits) arrives through the
// store's change feed within a second: the workspace's shares and
// reservation are marked stale, so its next request asks the store first,
// with the new limits, and the store shrinks the share (an rps share,
// which lasts RPSFor anyway, is given back with that ask).
package lease
