-- Leases of the rps window (package lease): a server takes a share of a
-- workspace's requests per second, a number of requests it admits in
-- memory within a short validity. The share is recorded in the window of
-- limiter_rate_take (004) as that many admissions now, in the same
-- buckets, so that servers that take one request per call (a rolling
-- upgrade) and servers that hold shares count each other: in any second
-- the requests admitted are at most p_limit plus the shares outstanding at
-- its start.
--
-- p_back gives back the unused part of an earlier share, recorded at
-- bucket p_back_at: taken out of that bucket while it is still in the
-- window (an expired bucket counts nothing any more). granted is at most
-- what is left of the window; 0 says reset_ms until it admits one more.
CREATE FUNCTION limiter_rate_lease(p_ws text, p_limit int, p_want int, p_back_at bigint, p_back int,
	OUT granted int, OUT remaining int, OUT reset_ms bigint, OUT at_ms bigint) AS $$
DECLARE
	w bigint := CASE WHEN p_limit <= 64 THEN 1 ELSE 16 END;
	now_ms bigint;
	h bigint[];
	c int[];
	n int;
	len int;
	i int := 1;
	j int;
	back int;
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
	IF p_back > 0 THEN
		FOR j IN 1..len LOOP
			IF h[j] = p_back_at THEN
				back := least(p_back, c[j]);
				c[j] := c[j] - back;
				n := n - back;
				EXIT;
			END IF;
		END LOOP;
	END IF;
	granted := greatest(least(p_want, p_limit - n), 0);
	at_ms := (now_ms + w - 1) / w * w;
	IF granted > 0 THEN
		IF len > 0 AND h[len] = at_ms THEN
			c[len] := c[len] + granted;
		ELSE
			h := h || at_ms;
			c := c || granted;
		END IF;
		n := n + granted;
	END IF;
	remaining := greatest(p_limit - n, 0);
	IF remaining > 0 OR len = 0 THEN
		reset_ms := 0;
	ELSE
		reset_ms := greatest(h[1] + 1000 - now_ms, 1);
	END IF;
	UPDATE limiter_rates SET hits = h, counts = c, total = n WHERE workspace_id = p_ws;
END
$$ LANGUAGE plpgsql;
