-- The request path in fewer statements (the per-request cost of limits and
-- billing). Same rules as 002 and 003; only the work per call shrinks.

-- rate_take keeps its log as buckets: hits[i] is the end of a bucket of
-- width w ms and counts[i] the admissions in it, total their sum. An
-- admission is recorded at the end of its bucket, never earlier than it
-- happened, so it stays counted at least a full second: any 1-second window
-- still holds at most p_limit admissions. Limits up to 64 use 1 ms buckets,
-- exactly the ms-granular log of 002; larger limits use 16 ms buckets, so a
-- request may be refused up to 16 ms before the exact log would admit it,
-- and the log never holds more than 63 entries however busy the workspace
-- (the 002 log grew with the request rate, and with it the cost of every
-- call under the row lock).
--
-- The row is inserted only on a workspace's first request, the clock is
-- read under the row lock so that buckets are appended in time order and
-- the expired ones are a prefix, and a refusal that expired nothing writes
-- nothing. Should the database clock step back, a newer bucket ahead of
-- older ones only delays their expiry: stricter for at most a second.
ALTER TABLE limiter_rates ADD COLUMN counts int[] NOT NULL DEFAULT '{}';
ALTER TABLE limiter_rates ADD COLUMN total int NOT NULL DEFAULT 0;
UPDATE limiter_rates SET counts = array_fill(1, ARRAY[cardinality(hits)]), total = cardinality(hits);

CREATE OR REPLACE FUNCTION limiter_rate_take(p_ws text, p_limit int,
	OUT allowed boolean, OUT remaining int, OUT reset_ms bigint) AS $$
DECLARE
	w bigint := CASE WHEN p_limit <= 64 THEN 1 ELSE 16 END;
	now_ms bigint;
	b bigint;
	h bigint[];
	c int[];
	n int;
	len int;
	i int := 1;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	SELECT hits, counts, total INTO h, c, n FROM limiter_rates WHERE workspace_id = p_ws FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO limiter_rates (workspace_id) VALUES (p_ws) ON CONFLICT (workspace_id) DO NOTHING;
		SELECT hits, counts, total INTO h, c, n FROM limiter_rates WHERE workspace_id = p_ws FOR UPDATE;
	END IF;
	now_ms := limiter_now_ms();
	len := coalesce(array_length(h, 1), 0);
	WHILE i <= len AND h[i] <= now_ms - 1000 LOOP
		n := n - c[i];
		i := i + 1;
	END LOOP;
	IF i > 1 THEN
		h := coalesce(h[i:len], '{}');
		c := coalesce(c[i:len], '{}');
		len := len - i + 1;
	END IF;
	allowed := n < p_limit;
	IF allowed THEN
		b := (now_ms + w - 1) / w * w;
		IF len > 0 AND h[len] = b THEN
			c[len] := c[len] + 1;
		ELSE
			h := h || b;
			c := c || 1;
		END IF;
		n := n + 1;
	END IF;
	remaining := greatest(p_limit - n, 0);
	IF remaining > 0 THEN
		reset_ms := 0;
	ELSE
		reset_ms := greatest(h[1] + 1000 - now_ms, 0);
	END IF;
	IF allowed OR i > 1 THEN
		UPDATE limiter_rates SET hits = h, counts = c, total = n WHERE workspace_id = p_ws;
	END IF;
END
$$ LANGUAGE plpgsql;

-- slot_take with releases: p_release are leases this server released and
-- has not yet deleted (Release deletes in the background); deleting them
-- first, in the same round trip, means a server always sees its own
-- releases. Expired leases are counted in the same scan as live ones and
-- deleted only when there are some. The 6-argument version of 002 stays
-- for servers not yet upgraded.
CREATE FUNCTION limiter_slot_take(p_ws text, p_kind text, p_limit int, p_lease text, p_holder text,
	p_ttl_ms bigint, p_release text[], OUT ok boolean, OUT free int) AS $$
DECLARE
	now_ms bigint;
	n int;
	expired int;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	IF cardinality(p_release) > 0 THEN
		DELETE FROM limiter_leases WHERE lease_id = ANY(p_release);
	END IF;
	PERFORM pg_advisory_xact_lock(hashtextextended('voicesvc/' || p_ws || '/' || p_kind, 0));
	now_ms := limiter_now_ms();
	SELECT count(*) FILTER (WHERE expires_at > now_ms), count(*) FILTER (WHERE expires_at <= now_ms)
		INTO n, expired FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind;
	IF expired > 0 THEN
		DELETE FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind AND expires_at <= now_ms;
	END IF;
	ok := n < p_limit;
	IF ok THEN
		INSERT INTO limiter_leases (lease_id, workspace_id, kind, holder, expires_at)
		VALUES (p_lease, p_ws, p_kind, p_holder, now_ms + p_ttl_ms);
		n := n + 1;
	END IF;
	free := greatest(p_limit - n, 0);
END
$$ LANGUAGE plpgsql;

-- slots_release frees leases in one statement (the background releaser's
-- batch), without waiting for the WAL flush.
CREATE FUNCTION limiter_slots_release(p_leases text[]) RETURNS void AS $$
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	DELETE FROM limiter_leases WHERE lease_id = ANY(p_leases);
END
$$ LANGUAGE plpgsql;

-- billing_charge, same rule and result as 003. A charge the allowance
-- covers (the common case) is one conditional upsert: it adds chars only if
-- used stays within the allowance, checked and written under the usage
-- row's lock, so it takes no workspace lock. Anything else locks the usage
-- row (so that no covered charge slips in between its read of used and its
-- write), then the workspace row (serializing it with refunds and workspace
-- updates, which write credits). The order is usage, then workspace,
-- everywhere (Refund, UpdateWorkspace): an upsert whose condition fails
-- keeps its row lock, so this path may already hold the usage row's lock
-- when it asks for the workspace's.
CREATE OR REPLACE FUNCTION billing_charge(p_ws text, p_month text, p_allowance bigint, p_chars bigint, p_enforce boolean,
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
END
$$ LANGUAGE plpgsql;
