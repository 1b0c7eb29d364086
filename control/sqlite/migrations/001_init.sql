-- Times are epoch milliseconds; 0 means "never" where a column says so.
CREATE TABLE workspaces (
	id          TEXT PRIMARY KEY,
	name        TEXT NOT NULL,
	plan        TEXT NOT NULL,
	billing     TEXT NOT NULL DEFAULT '',
	streaming   INTEGER,          -- NULL: the plan's value
	allowance   INTEGER,
	credits     INTEGER NOT NULL DEFAULT 0,
	concurrency INTEGER,
	rps         INTEGER,
	sessions    INTEGER,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);

CREATE TABLE api_keys (
	id           TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	hash         BLOB NOT NULL UNIQUE,
	scopes       TEXT NOT NULL,   -- JSON array
	legacy       INTEGER NOT NULL DEFAULT 0,
	expires_at   INTEGER NOT NULL DEFAULT 0,
	revoked_at   INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL
);

CREATE TABLE access_tokens (
	id           TEXT PRIMARY KEY,
	hash         BLOB NOT NULL UNIQUE,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	key_id       TEXT NOT NULL,
	voice_ids    TEXT NOT NULL,   -- JSON array
	expires_at   INTEGER NOT NULL,
	consumed_at  INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL
);

CREATE TABLE voices (
	id               TEXT PRIMARY KEY,
	org_id           TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	name             TEXT NOT NULL,
	description      TEXT NOT NULL DEFAULT '',
	status           TEXT NOT NULL,
	clone_method     TEXT NOT NULL DEFAULT '',
	visibility       TEXT NOT NULL,
	primary_language TEXT NOT NULL DEFAULT '',
	labels           TEXT NOT NULL DEFAULT '[]',
	settings         TEXT,        -- JSON object; NULL when unset
	sample_audio_url TEXT NOT NULL DEFAULT '',
	base_voice_id    TEXT NOT NULL DEFAULT '',
	alias            TEXT NOT NULL DEFAULT '',
	profile          BLOB,
	consent_at       INTEGER NOT NULL DEFAULT 0,
	consent_key_id   TEXT NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
);
CREATE INDEX voices_org ON voices(org_id, created_at DESC);
CREATE INDEX voices_public ON voices(visibility, status, alias);
CREATE INDEX voices_alias ON voices(alias);

-- Jobs outlive their voice (a deleted voice leaves a cancelled job).
CREATE TABLE jobs (
	id          TEXT PRIMARY KEY,
	voice_id    TEXT NOT NULL,
	org_id      TEXT NOT NULL,
	job_type    TEXT NOT NULL,
	status      TEXT NOT NULL,
	progress    INTEGER NOT NULL DEFAULT 0,
	error       TEXT,             -- JSON JobError; NULL when none
	attempts    INTEGER NOT NULL DEFAULT 0,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until INTEGER NOT NULL DEFAULT 0,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE INDEX jobs_claim ON jobs(status, created_at);
CREATE INDEX jobs_voice ON jobs(voice_id);

CREATE TABLE clips (
	job_id   TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
	data     BLOB NOT NULL,
	filename TEXT NOT NULL DEFAULT '',
	language TEXT NOT NULL DEFAULT '',
	ref_text TEXT NOT NULL DEFAULT ''
);

CREATE TABLE usage (
	workspace_id TEXT NOT NULL,
	month        TEXT NOT NULL,   -- "2006-01", UTC
	used         INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (workspace_id, month)
);

CREATE TABLE idempotency (
	workspace_id TEXT NOT NULL,
	key          TEXT NOT NULL,
	fingerprint  TEXT NOT NULL,
	state        TEXT NOT NULL,   -- in_progress | done
	status       INTEGER NOT NULL DEFAULT 0,
	headers      TEXT NOT NULL DEFAULT '{}',
	body         BLOB,
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_created ON idempotency(created_at);

-- The change feed: every admin-visible change, polled by servers.
CREATE TABLE changes (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	id         TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
