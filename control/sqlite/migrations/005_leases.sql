-- Leases (package lease): a server holds shares of a workspace's slots and
-- a reservation of its characters, so that its requests count and charge in
-- memory. Times are epoch milliseconds of the store's clock.
CREATE TABLE slot_leases (
	workspace_id TEXT NOT NULL,
	kind         TEXT NOT NULL,
	holder       TEXT NOT NULL,
	held         INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, kind, holder)
);
CREATE INDEX slot_leases_holder ON slot_leases (holder);

-- Characters of a month's balance that one holder may charge without
-- asking; not used characters (usage counts them when synthesized).
CREATE TABLE billing_reservations (
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	holder       TEXT NOT NULL,
	month        TEXT NOT NULL,
	chars        INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, holder)
);
CREATE INDEX billing_reservations_holder ON billing_reservations (holder);
