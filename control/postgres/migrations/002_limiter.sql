-- Limits shared by all servers (control.Limiter). Times are the database
-- server's clock in epoch milliseconds, so servers' clocks never disagree.

-- A held concurrency slot. A holder renews its rows while it lives; rows of
-- a crashed holder expire and are deleted by the next acquirer.
CREATE TABLE limiter_leases (
	lease_id     text PRIMARY KEY,
	workspace_id text NOT NULL,
	kind         text NOT NULL,
	holder       text NOT NULL,
	expires_at   bigint NOT NULL
);
CREATE INDEX limiter_leases_ws ON limiter_leases(workspace_id, kind);
CREATE INDEX limiter_leases_holder ON limiter_leases(holder);

-- The admission times of the last second per workspace (a sliding log).
CREATE TABLE limiter_rates (
	workspace_id text PRIMARY KEY,
	hits         bigint[] NOT NULL DEFAULT '{}'
);

CREATE FUNCTION limiter_now_ms() RETURNS bigint AS $$
	SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$ LANGUAGE sql VOLATILE;

-- slot_take takes one of p_limit slots of (p_ws, p_kind) in one round trip.
-- The advisory lock serializes takers of one workspace and kind on every
-- server, so that the count and the insert cannot interleave.
CREATE FUNCTION limiter_slot_take(p_ws text, p_kind text, p_limit int, p_lease text, p_holder text,
	p_ttl_ms bigint, OUT ok boolean, OUT free int) AS $$
DECLARE
	now_ms bigint := limiter_now_ms();
	n int;
BEGIN
	-- Leases are ephemeral: a commit lost in a database crash costs nothing,
	-- so the commit does not wait for the WAL flush.
	PERFORM set_config('synchronous_commit', 'off', true);
	PERFORM pg_advisory_xact_lock(hashtextextended('voicesvc/' || p_ws || '/' || p_kind, 0));
	DELETE FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind AND expires_at <= now_ms;
	SELECT count(*) INTO n FROM limiter_leases WHERE workspace_id = p_ws AND kind = p_kind;
	ok := n < p_limit;
	IF ok THEN
		INSERT INTO limiter_leases (lease_id, workspace_id, kind, holder, expires_at)
		VALUES (p_lease, p_ws, p_kind, p_holder, now_ms + p_ttl_ms);
		n := n + 1;
	END IF;
	free := greatest(p_limit - n, 0);
END
$$ LANGUAGE plpgsql;

-- rate_take admits one request of p_ws if fewer than p_limit were admitted
-- in the last 1,000 ms, under the workspace row's lock. reset_ms is how long
-- until one more request would be admitted.
CREATE FUNCTION limiter_rate_take(p_ws text, p_limit int,
	OUT allowed boolean, OUT remaining int, OUT reset_ms bigint) AS $$
DECLARE
	now_ms bigint := limiter_now_ms();
	h bigint[];
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	INSERT INTO limiter_rates (workspace_id) VALUES (p_ws) ON CONFLICT (workspace_id) DO NOTHING;
	SELECT hits INTO h FROM limiter_rates WHERE workspace_id = p_ws FOR UPDATE;
	h := ARRAY(SELECT x FROM unnest(h) AS x WHERE x > now_ms - 1000 ORDER BY x);
	allowed := coalesce(array_length(h, 1), 0) < p_limit;
	IF allowed THEN
		h := h || now_ms;
	END IF;
	remaining := greatest(p_limit - coalesce(array_length(h, 1), 0), 0);
	IF remaining > 0 THEN
		reset_ms := 0;
	ELSE
		reset_ms := greatest(h[1] + 1000 - now_ms, 0);
	END IF;
	UPDATE limiter_rates SET hits = h WHERE workspace_id = p_ws;
END
$$ LANGUAGE plpgsql;

-- slot_release frees one lease without waiting for the WAL flush.
CREATE FUNCTION limiter_slot_release(p_lease text) RETURNS void AS $$
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	DELETE FROM limiter_leases WHERE lease_id = p_lease;
END
$$ LANGUAGE plpgsql;
