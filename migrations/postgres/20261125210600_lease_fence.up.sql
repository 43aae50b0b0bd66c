-- fence_seq: every fenced write of the leader adds one in its own transaction
-- (store.Fence), so the lease row is in the write set the database must
-- certify (Galera) or lock (InnoDB): a takeover committed or under way
-- conflicts with it. A counter, not a timestamp, so the row always changes
-- and MySQL's affected-rows count (changed rows) is always one.
ALTER TABLE leases ADD COLUMN fence_seq BIGINT NOT NULL DEFAULT 0;
