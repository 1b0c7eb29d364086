-- Drop the functions of 002 that 004 superseded, so that the database holds
-- one definition of each rule. Since 004 slots are taken with the
-- 7-argument limiter_slot_take and released with limiter_slots_release; no
-- code calls the 6-argument limiter_slot_take or limiter_slot_release.
--
-- limiter_rate_take (002) and billing_charge (003) were replaced in place by
-- 004 (CREATE OR REPLACE): their live definitions are those in
-- 004_fast_paths.sql, and there is nothing left over to drop.
DROP FUNCTION IF EXISTS limiter_slot_take(text, text, int, text, text, bigint);
DROP FUNCTION IF EXISTS limiter_slot_release(text);
