-- covers: for a catch-up run (misfire policy run_once), how many missed fires it stands for; 0 otherwise.
ALTER TABLE runs ADD COLUMN covers INTEGER NOT NULL DEFAULT 0;
