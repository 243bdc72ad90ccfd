-- Uploads are bounded (SPEC 5, v3.1). An upload's content moves out of its row into pieces of
-- at most 256 KiB (`upload_chunks`), each written in a short transaction of its own. An upload
-- exists once its row in `uploads` does (written last, in one transaction with the boundary's
-- usage): pieces without a row are an upload that failed or is under way, invisible to
-- readers, and the sweeper deletes those older than an hour. No foreign key ties the pieces to
-- their boundary, so that deleting a boundary deletes its rows at once and leaves the pieces to
-- the sweeper.
CREATE TABLE upload_chunks (
    boundary   TEXT COLLATE "C" NOT NULL,
    id         TEXT COLLATE "C" NOT NULL,
    seq        BIGINT NOT NULL,
    content    BYTEA NOT NULL,
    written_at TEXT NOT NULL,
    PRIMARY KEY (boundary, id, seq)
);
INSERT INTO upload_chunks (boundary, id, seq, content, written_at)
    SELECT boundary, id, 0, content, created_at FROM uploads;
-- The sweeper's search for chunks older than its cutoff that belong to no stored upload reads
-- this index only, never the chunks' content.
CREATE INDEX upload_chunks_by_age ON upload_chunks (written_at, boundary, id, seq);
ALTER TABLE uploads DROP COLUMN content;

-- When a resource last named the upload in `upload` (a create or an update writing it): an
-- upload that no resource names is deleted 24 hours after it was made or last named.
ALTER TABLE uploads ADD COLUMN named_at TEXT;

-- The bytes of uploads each boundary stores, as `serve --max-upload-bytes` counts them,
-- changed with every upload stored or deleted.
CREATE TABLE upload_usage (
    boundary TEXT COLLATE "C" PRIMARY KEY REFERENCES boundaries (name),
    bytes    BIGINT NOT NULL
);
INSERT INTO upload_usage (boundary, bytes)
    SELECT boundary, SUM(CASE WHEN size < 4096 THEN 4096 ELSE size END) FROM uploads GROUP BY boundary;

-- The upload a resource names, so that the sweeper finds the uploads no resource names.
ALTER TABLE resources ADD COLUMN upload TEXT COLLATE "C";
UPDATE resources SET upload = body_json::jsonb ->> 'upload'
    WHERE (body_json::jsonb ->> 'upload') IS NOT NULL;
CREATE INDEX resources_by_upload ON resources (boundary, upload) WHERE upload IS NOT NULL;
