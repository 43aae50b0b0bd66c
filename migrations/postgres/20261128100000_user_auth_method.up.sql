-- auth_method says where a user signs in: '' is a local password, 'ldap' (or another external method) a directory that created the user just in time; such a user has no local password.
ALTER TABLE users ADD COLUMN auth_method VARCHAR(16) NOT NULL DEFAULT '';
