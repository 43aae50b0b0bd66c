-- One row per cluster duty lease (name 'cluster'): the master holding it is
-- the leader; epoch grows at every change of holder and fences its writes.
CREATE TABLE leases (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    holder VARCHAR(64) NOT NULL DEFAULT '',
    epoch BIGINT NOT NULL DEFAULT 0,
    expires_at TIMESTAMP(6) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL
);
--bun:split
INSERT INTO leases (name, holder, epoch, expires_at, updated_at) VALUES ('cluster', '', 0, '2000-01-01 00:00:00', '2000-01-01 00:00:00');
--bun:split
-- Which master recorded an event.
ALTER TABLE events ADD COLUMN master VARCHAR(64) NOT NULL DEFAULT '';
--bun:split
-- Failed logins shared by every master (the throttle holds across masters).
CREATE TABLE login_failures (
    k VARCHAR(128) NOT NULL PRIMARY KEY,
    failures INTEGER NOT NULL DEFAULT 0,
    window_start TIMESTAMP(6) NOT NULL,
    blocked_until TIMESTAMP(6) NULL
);
