-- Portal sessions signed out before they expired: a session lives in its sealed cookie, so
-- ending it means remembering its id until it would have expired anyway.

CREATE TABLE ended_sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    expires_at TEXT NOT NULL
);
CREATE INDEX ended_sessions_by_expiry ON ended_sessions (expires_at);
