-- expires_at: when an API token stops working (NULL: never); chosen at creation.
ALTER TABLE api_tokens ADD COLUMN expires_at TIMESTAMP(6) NULL;
