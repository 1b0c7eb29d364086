-- Workspace voice aliases: extra names a workspace gives to voices it can
-- use (its own or public ones). A row belongs to the aliasing workspace and
-- names the voice by id, whatever workspace owns the voice (a catalog
-- voice's is the catalog workspace). Unique per workspace; deleted with the
-- voice and with the workspace. position keeps the order the list was set.
CREATE TABLE voice_aliases (
	workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	alias        TEXT NOT NULL,
	voice_id     TEXT NOT NULL REFERENCES voices(id) ON DELETE CASCADE,
	position     INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, alias)
) WITHOUT ROWID;
CREATE INDEX voice_aliases_voice ON voice_aliases (voice_id, workspace_id, position);
