-- billing_charge is Charge in one round trip (control.SplitCharge is the
-- same rule in Go; the store test suite checks both agree). The workspace
-- row lock serializes charges, refunds and workspace updates on every
-- server; each statement of a plpgsql function takes a new snapshot, so the
-- usage read after the lock sees what the previous holder committed.
--
-- The commit does not wait for the WAL flush (a disk sync costs ~3 ms here,
-- the rest of the charge ~0.3 ms): a database crash may forget the charges of
-- its last fraction of a second (under-billing, never double billing or a
-- torn balance). Remove the set_config line to trade that for latency.
CREATE FUNCTION billing_charge(p_ws text, p_month text, p_allowance bigint, p_chars bigint, p_enforce boolean,
	OUT ws_found boolean, OUT ok boolean, OUT used_before bigint, OUT credits_before bigint,
	OUT from_allowance bigint, OUT from_credits bigint) AS $$
DECLARE
	rest bigint;
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
	ok := false;
	from_allowance := 0;
	from_credits := 0;
	SELECT credits INTO credits_before FROM workspaces WHERE id = p_ws FOR UPDATE;
	ws_found := FOUND;
	IF NOT ws_found THEN
		RETURN;
	END IF;
	SELECT used INTO used_before FROM usage WHERE workspace_id = p_ws AND month = p_month;
	used_before := coalesce(used_before, 0);
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
		INSERT INTO usage (workspace_id, month, used) VALUES (p_ws, p_month, from_allowance)
		ON CONFLICT (workspace_id, month) DO UPDATE SET used = usage.used + excluded.used;
	END IF;
END
$$ LANGUAGE plpgsql;
