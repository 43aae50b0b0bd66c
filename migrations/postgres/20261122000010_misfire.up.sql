-- misfire_accounted_until: while a running task has no running executor (or
-- until the master has accounted for such an outage), the instant up to which
-- its fires are accounted for; fires after it are missed and not yet recorded
-- (a skipped run, or a catch-up run). NULL when no outage is open.
ALTER TABLE tasks ADD COLUMN misfire_accounted_until TIMESTAMP(6) NULL;
