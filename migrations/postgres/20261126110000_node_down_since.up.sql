-- down_since: since when a node that stopped running is down. A node the
-- health checks take offline is down since its last successful probe
-- (last_seen), not since the checks gave up on it, so the fires its tasks
-- missed between its death and its detection are accounted for as well
-- (the misfire windows and the hand-over to a restarted worker start here).
-- NULL while it runs or before it ever stopped.
ALTER TABLE nodes ADD COLUMN down_since TIMESTAMP(6) NULL;
