-- Named connections: what tasks of the types beyond HTTP and shell reach
-- (a NATS server, a RabbitMQ broker, a database...), defined once per
-- project (project_id 0: for every project, by a cluster admin) and
-- referred to by name. secret_enc is the secret sealed with a key derived
-- from the cluster key (AES-256-GCM); tls and options are JSON. version
-- moves at every save, so an edit is a conditional update and workers
-- know their pooled client is stale.
CREATE TABLE connections (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    project_id BIGINT NOT NULL,
    name VARCHAR(100) NOT NULL,
    kind VARCHAR(16) NOT NULL,
    address VARCHAR(1000) NOT NULL,
    database_name VARCHAR(200) NOT NULL DEFAULT '',
    user_name VARCHAR(200) NOT NULL DEFAULT '',
    secret_enc TEXT NOT NULL,
    tls TEXT NOT NULL,
    options TEXT NOT NULL,
    description VARCHAR(1000) NOT NULL DEFAULT '',
    version BIGINT NOT NULL,
    created_by VARCHAR(200) NOT NULL DEFAULT '',
    created_at TIMESTAMP(6) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL
);
--bun:split
CREATE UNIQUE INDEX idx_connections_name ON connections (project_id, name);
