-- The report id a fire's winner will give its first report (empty for
-- claims of older workers): a winner that goes offline or restarts before
-- it reports leaves that run recorded lost, never missing.
ALTER TABLE locks ADD COLUMN run_id VARCHAR(64) NOT NULL DEFAULT '';
