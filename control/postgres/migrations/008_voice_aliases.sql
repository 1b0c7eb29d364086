-- Workspace voice aliases: extra names a workspace gives to voices it can
-- use (its own or public ones). A row belongs to the aliasing workspace and
-- names the voice by id, whatever workspace owns the voice (a catalog
-- voice's is the catalog workspace). Unique per workspace; deleted with the
-- voice and with the workspace. position keeps the order the list was set.
-- Writers of one workspace's aliases serialize on an advisory lock of the
-- workspace (control/postgres/alias.go), so the check for a taken alias and
-- the insert cannot interleave; the primary key stays the last word.
CREATE TABLE voice_aliases (
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	alias        text NOT NULL CHECK (char_length(alias) BETWEEN 1 AND 64),
	voice_id     text NOT NULL REFERENCES voices(id) ON DELETE CASCADE,
	position     integer NOT NULL DEFAULT 0,
	created_at   bigint NOT NULL,
	PRIMARY KEY (workspace_id, alias)
);
CREATE INDEX voice_aliases_voice ON voice_aliases (voice_id, workspace_id, position);
