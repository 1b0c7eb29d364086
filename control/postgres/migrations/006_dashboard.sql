-- The dashboard: named keys, single-use login links, cookie sessions (both
-- stored as the SHA-256 of their secret) and the characters billed per UTC
-- day, which the usage page charts.
ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at);

CREATE TABLE login_links (
	hash         bytea PRIMARY KEY,
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	expires_at   bigint NOT NULL,
	created_at   bigint NOT NULL
);

CREATE TABLE dashboard_sessions (
	id           text PRIMARY KEY,
	hash         bytea NOT NULL UNIQUE,
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	expires_at   bigint NOT NULL,
	created_at   bigint NOT NULL
);

-- usage_daily is written after the usage row (and the workspace row) in
-- every transaction, so it adds no lock-order cycle to billing_charge's.
CREATE TABLE usage_daily (
	workspace_id text NOT NULL,
	day          text NOT NULL,   -- "2006-01-02", UTC
	characters   bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (workspace_id, day)
);

CREATE FUNCTION billing_daily_add(p_ws text, p_day text, p_chars bigint) RETURNS void AS $$
BEGIN
	IF p_chars <> 0 AND p_day <> '' THEN
		INSERT INTO usage_daily (workspace_id, day, characters) VALUES (p_ws, p_day, p_chars)
		ON CONFLICT (workspace_id, day) DO UPDATE SET characters = usage_daily.characters + excluded.characters;
	END IF;
END
$$ LANGUAGE plpgsql;

-- billing_charge of 004 with the day: what a charge takes is added to the
-- day's characters in the same transaction. Same rule, same locks.
DROP FUNCTION billing_charge(text, text, bigint, bigint, boolean);
CREATE FUNCTION billing_charge(p_ws text, p_month text, p_day text, p_allowance bigint, p_chars bigint, p_enforce boolean,
	OUT ws_found boolean, OUT ok boolean, OUT used_before bigint, OUT credits_before bigint,
	OUT from_allowance bigint, OUT from_credits bigint) AS $$
DECLARE
	rest bigint;
	used_after bigint;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	ok := false;
	from_allowance := 0;
	from_credits := 0;
	IF p_chars <= p_allowance THEN
		INSERT INTO usage (workspace_id, month, used)
		SELECT id, p_month, p_chars FROM workspaces WHERE id = p_ws
		ON CONFLICT (workspace_id, month) DO UPDATE SET used = usage.used + excluded.used
			WHERE usage.used + excluded.used <= p_allowance
		RETURNING used, (SELECT credits FROM workspaces WHERE id = p_ws) INTO used_after, credits_before;
		IF FOUND THEN
			ws_found := true;
			ok := true;
			used_before := used_after - p_chars;
			from_allowance := p_chars;
			PERFORM billing_daily_add(p_ws, p_day, p_chars);
			RETURN;
		END IF;
	END IF;

	PERFORM 1 FROM workspaces WHERE id = p_ws;
	ws_found := FOUND;
	IF NOT ws_found THEN
		RETURN;
	END IF;
	SELECT used INTO used_before FROM usage WHERE workspace_id = p_ws AND month = p_month FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO usage (workspace_id, month, used) VALUES (p_ws, p_month, 0)
		ON CONFLICT (workspace_id, month) DO NOTHING;
		SELECT used INTO used_before FROM usage WHERE workspace_id = p_ws AND month = p_month FOR UPDATE;
	END IF;
	SELECT credits INTO credits_before FROM workspaces WHERE id = p_ws FOR NO KEY UPDATE;
	ws_found := FOUND;
	IF NOT ws_found THEN
		RETURN;
	END IF;
	from_allowance := least(p_chars, greatest(p_allowance - used_before, 0));
	rest := p_chars - from_allowance;
	from_credits := least(rest, credits_before);
	IF rest > from_credits THEN
		IF p_enforce THEN
			from_allowance := 0;
			from_credits := 0;
			RETURN;
		END IF;
		from_allowance := from_allowance + rest - from_credits;
	END IF;
	ok := true;
	IF from_credits <> 0 THEN
		UPDATE workspaces SET credits = credits - from_credits WHERE id = p_ws;
	END IF;
	IF from_allowance <> 0 THEN
		UPDATE usage SET used = used + from_allowance WHERE workspace_id = p_ws AND month = p_month;
	END IF;
	PERFORM billing_daily_add(p_ws, p_day, from_allowance + from_credits);
END
$$ LANGUAGE plpgsql;
