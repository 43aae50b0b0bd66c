-- The labels a worker declared that an admin approved (by approving the
-- node, or the pool a label names): with approval on, only these and the
-- admin's own labels select the node. NULL: every declared label (nodes
-- from before).
ALTER TABLE nodes ADD COLUMN approved_labels VARCHAR(2400) NULL;
