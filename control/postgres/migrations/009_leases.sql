-- Leases (package lease): a server holds shares of a workspace's slots and
-- a reservation of its characters, so that its requests count and charge in
-- memory. Times are the database's clock (limiter_now_ms), like 002's.

-- A share of slots is rows of limiter_leases, one per slot, with ids
-- holder/workspace/kind/i: servers that take one row per request (002, 004)
-- count them, and these count theirs, so old and new servers on one
-- database keep one limit.
-- p_used (the holder's slots in use) is kept even beyond the limit: running
-- streams hold their slots when a limit is lowered under them.
CREATE FUNCTION limiter_slots_lease(p_ws text, p_kind text, p_limit int, p_holder text, p_used int, p_want int,
	p_ttl_ms bigint, OUT held int, OUT free int) AS $$
DECLARE
	now_ms bigint;
	others int;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	PERFORM pg_advisory_xact_lock(hashtextextended('voicesvc/' || p_ws || '/' || p_kind, 0));
	now_ms := limiter_now_ms();
	DELETE FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind
		AND (expires_at <= now_ms OR holder = p_holder);
	SELECT count(*) INTO others FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind;
	held := greatest(least(greatest(p_want, 0), greatest(p_limit - others, 0)), greatest(p_used, 0));
	INSERT INTO limiter_leases (lease_id, workspace_id, kind, holder, expires_at)
		SELECT p_holder || '/' || p_ws || '/' || p_kind || '/' || i, p_ws, p_kind, p_holder, now_ms + p_ttl_ms
		FROM generate_series(1, held) AS i;
	free := greatest(p_limit - others - held, 0);
END
$$ LANGUAGE plpgsql;

-- A reservation: characters of a month's balance that one holder may
-- charge without asking. They are not used characters: usage counts a
-- character when it is synthesized (the holder settles it later).
CREATE TABLE billing_reservations (
	workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	holder       text NOT NULL,
	month        text NOT NULL,
	chars        bigint NOT NULL,
	expires_at   bigint NOT NULL,
	PRIMARY KEY (workspace_id, holder)
);
CREATE INDEX billing_reservations_holder ON billing_reservations(holder);

-- billing_charge of 006 for servers that charge per request (a rolling
-- upgrade): it now leaves other holders' reservations alone. A charge that
-- fits the allowance less the reservations is the conditional upsert;
-- anything else takes the locks of 004 (usage, then workspace) and counts
-- the reservations as spent, allowance first.
CREATE OR REPLACE FUNCTION billing_charge(p_ws text, p_month text, p_day text, p_allowance bigint, p_chars bigint, p_enforce boolean,
	OUT ws_found boolean, OUT ok boolean, OUT used_before bigint, OUT credits_before bigint,
	OUT from_allowance bigint, OUT from_credits bigint) AS $$
DECLARE
	reserved bigint;
	left_a bigint;
	rest bigint;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	ok := false;
	from_allowance := 0;
	from_credits := 0;
	PERFORM 1 FROM workspaces WHERE id = p_ws;
	ws_found := FOUND;
	IF NOT ws_found THEN
		RETURN;
	END IF;
	INSERT INTO usage (workspace_id, month, used) VALUES (p_ws, p_month, 0)
	ON CONFLICT (workspace_id, month) DO NOTHING;
	SELECT used INTO used_before FROM usage WHERE workspace_id = p_ws AND month = p_month FOR UPDATE;
	SELECT credits INTO credits_before FROM workspaces WHERE id = p_ws FOR NO KEY UPDATE;
	SELECT coalesce(sum(chars), 0) INTO reserved FROM billing_reservations
		WHERE workspace_id = p_ws AND month = p_month AND expires_at > limiter_now_ms();
	-- The reservations, allowance first, as if already used.
	left_a := greatest(p_allowance - used_before, 0);
	IF reserved <= left_a THEN
		left_a := left_a - reserved;
		rest := credits_before;
	ELSE
		rest := greatest(credits_before - (reserved - left_a), 0);
		left_a := 0;
	END IF;
	from_allowance := least(p_chars, left_a);
	from_credits := least(p_chars - from_allowance, rest);
	IF from_allowance + from_credits < p_chars THEN
		IF p_enforce THEN
			from_allowance := 0;
			from_credits := 0;
			used_before := used_before + (greatest(p_allowance - used_before, 0) - left_a);
			credits_before := rest;
			RETURN;
		END IF;
		from_allowance := p_chars - from_credits;
	END IF;
	ok := true;
	UPDATE usage SET used = used + from_allowance WHERE workspace_id = p_ws AND month = p_month;
	IF from_credits > 0 THEN
		UPDATE workspaces SET credits = credits - from_credits WHERE id = p_ws;
	END IF;
	PERFORM billing_daily_add(p_ws, p_day, p_chars);
END
$$ LANGUAGE plpgsql;
