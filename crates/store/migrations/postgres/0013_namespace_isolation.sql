-- Which namespaces a boundary may hold (SPEC 3.4, v3.2).
-- The names an admin reserves in a cluster besides `default` and `kube-*`, one per line.
ALTER TABLE clusters ADD COLUMN reserved_namespaces TEXT NOT NULL DEFAULT '';
-- The uid of the namespace palisade created or adopted: its label is restored on that
-- namespace only. NULL in rows made before this column existed: the reconciler learns it once
-- from the cluster.
ALTER TABLE namespaces ADD COLUMN uid TEXT;
-- When the reconciler found the namespace deleted in the cluster (or made again by someone
-- else, with another uid); NULL while it is the boundary's.
ALTER TABLE namespaces ADD COLUMN gone_at TEXT;
