-- Leases of the rps window (package lease): the requests a workspace's
-- servers admitted, and the shares they took, by the millisecond they were
-- recorded at. A share counts as that many requests admitted when granted,
-- so that in any second the requests admitted are at most the limit plus
-- the shares outstanding at its start. Rows older than a second are
-- deleted by the next grant.
CREATE TABLE rate_window (
	workspace_id TEXT NOT NULL,
	at           INTEGER NOT NULL,
	n            INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, at)
);
