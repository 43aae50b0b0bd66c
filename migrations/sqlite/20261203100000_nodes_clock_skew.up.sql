-- clock_skew_ms: how far the node's clock is from the master's, in
-- milliseconds (positive: ahead), measured at its registration and at every
-- health probe (the worker sends its time; a probe's round trip is halved
-- away). NULL until measured, and for nodes that do not send their time
-- (masters, workers of earlier versions).
ALTER TABLE nodes ADD COLUMN clock_skew_ms INTEGER NULL;
