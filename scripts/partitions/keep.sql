-- Keeps what retention must not drop from a pair of partitions (:part,
-- YYYYMMDDHH24), once both are detached: its status rows that are not SENT
-- (FAILED, PENDING, held) with their events, and the events that have no
-- status row (any event the stream never delivered), copied back into the
-- parents, which route them to the DEFAULT partitions now that the range is
-- no partition's. The CHECKs that kept that range out of the DEFAULT
-- partitions go first. To the relay's stream, a copied event is an INSERT of
-- an event that already has a status row, which it does not publish
-- (existing.sql); an event with none is published, as it should be.
--
-- Which rows stay is read from indexes only (the partial index of status
-- rows that are not SENT, and an anti-join of the two primary keys); the
-- heap is read only for the rows copied. The first version read the whole
-- partition (4.4 to 6.0 s for 2,874,261 events, the application's INSERTs
-- waiting up to 25 ms meanwhile).
\set ON_ERROR_STOP on
ALTER TABLE proto.events_default DROP CONSTRAINT not_:part;
ALTER TABLE proto.deliveries_default DROP CONSTRAINT not_:part;
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_hashjoin = off;
CREATE TEMP TABLE kept ON COMMIT DROP AS
    SELECT d.event_id AS id FROM proto.deliveries_:part d WHERE d.status <> 'SENT'
    UNION ALL
    SELECT e.id FROM proto.events_:part e
    WHERE NOT EXISTS (SELECT 1 FROM proto.deliveries_:part d WHERE d.event_id = e.id);
INSERT INTO proto.deliveries SELECT d.* FROM proto.deliveries_:part d JOIN kept k ON k.id = d.event_id;
INSERT INTO proto.events SELECT e.* FROM proto.events_:part e JOIN kept k ON k.id = e.id;
COMMIT;
