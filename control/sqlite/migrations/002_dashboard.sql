-- The dashboard: named keys, single-use login links, cookie sessions (both
-- stored as the SHA-256 of their secret) and the characters billed per UTC
-- day, which the usage page charts.
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at);

CREATE TABLE login_links (
	hash         BLOB PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	expires_at   INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);

CREATE TABLE dashboard_sessions (
	id           TEXT PRIMARY KEY,
	hash         BLOB NOT NULL UNIQUE,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	expires_at   INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);

CREATE TABLE usage_daily (
	workspace_id TEXT NOT NULL,
	day          TEXT NOT NULL,   -- "2006-01-02", UTC
	characters   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (workspace_id, day)
);
