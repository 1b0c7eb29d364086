-- Times are epoch milliseconds; 0 means "never" where a column says so.
CREATE TABLE workspaces (
	id          text PRIMARY KEY,
	name        text NOT NULL,
	plan        text NOT NULL,
	billing     text NOT NULL DEFAULT '',
	streaming   boolean,          -- NULL: the plan's value
	allowance   bigint,
	credits     bigint NOT NULL DEFAULT 0,
	concurrency integer,
	rps         integer,
	sessions    integer,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL
);

CREATE TABLE api_keys (
	id           text PRIMARY KEY,
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	hash         bytea NOT NULL UNIQUE,
	scopes       text[] NOT NULL,
	legacy       boolean NOT NULL DEFAULT false,
	expires_at   bigint NOT NULL DEFAULT 0,
	revoked_at   bigint NOT NULL DEFAULT 0,
	created_at   bigint NOT NULL
);

CREATE TABLE access_tokens (
	id           text PRIMARY KEY,
	hash         bytea NOT NULL UNIQUE,
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	key_id       text NOT NULL,
	voice_ids    text[] NOT NULL,
	expires_at   bigint NOT NULL,
	consumed_at  bigint NOT NULL DEFAULT 0,
	created_at   bigint NOT NULL
);

CREATE TABLE voices (
	id               text PRIMARY KEY,
	org_id           text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	name             text NOT NULL,
	description      text NOT NULL DEFAULT '',
	status           text NOT NULL,
	clone_method     text NOT NULL DEFAULT '',
	visibility       text NOT NULL,
	primary_language text NOT NULL DEFAULT '',
	labels           jsonb NOT NULL DEFAULT '[]',
	settings         jsonb,       -- NULL when unset
	sample_audio_url text NOT NULL DEFAULT '',
	base_voice_id    text NOT NULL DEFAULT '',
	alias            text NOT NULL DEFAULT '',
	profile          bytea,
	consent_at       bigint NOT NULL DEFAULT 0,
	consent_key_id   text NOT NULL DEFAULT '',
	created_at       bigint NOT NULL,
	updated_at       bigint NOT NULL
);
CREATE INDEX voices_org ON voices(org_id, created_at DESC);
CREATE INDEX voices_public ON voices(visibility, status, alias);
CREATE INDEX voices_alias ON voices(alias);

-- Jobs outlive their voice (a deleted voice leaves a cancelled job).
CREATE TABLE jobs (
	id          text PRIMARY KEY,
	voice_id    text NOT NULL,
	org_id      text NOT NULL,
	job_type    text NOT NULL,
	status      text NOT NULL,
	progress    integer NOT NULL DEFAULT 0,
	error       jsonb,            -- JobError; NULL when none
	attempts    integer NOT NULL DEFAULT 0,
	lease_owner text NOT NULL DEFAULT '',
	lease_until bigint NOT NULL DEFAULT 0,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL
);
CREATE INDEX jobs_claim ON jobs(status, created_at);
CREATE INDEX jobs_voice ON jobs(voice_id);

CREATE TABLE clips (
	job_id   text PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
	data     bytea NOT NULL,
	filename text NOT NULL DEFAULT '',
	language text NOT NULL DEFAULT '',
	ref_text text NOT NULL DEFAULT ''
);

CREATE TABLE usage (
	workspace_id text NOT NULL,
	month        text NOT NULL,   -- "2006-01", UTC
	used         bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (workspace_id, month)
);

CREATE TABLE idempotency (
	workspace_id text NOT NULL,
	key          text NOT NULL,
	fingerprint  text NOT NULL,
	state        text NOT NULL,   -- in_progress | done
	status       integer NOT NULL DEFAULT 0,
	headers      jsonb NOT NULL DEFAULT '{}',
	body         bytea,
	created_at   bigint NOT NULL,
	PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_created ON idempotency(created_at);

-- The change feed: every change is a row here and a NOTIFY; servers that
-- reconnect catch up from the rows.
CREATE TABLE changes (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind       text NOT NULL,
	id         text NOT NULL,
	created_at bigint NOT NULL
);
