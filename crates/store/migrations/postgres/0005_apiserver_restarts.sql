-- API server starts the reconciler noticed in each cluster (a process start time it had not seen
-- since it first looked): how many, and when it saw the last one.
ALTER TABLE clusters ADD COLUMN apiserver_restarts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN apiserver_restarted_at TEXT;
