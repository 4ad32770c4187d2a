-- Whether a pair of partitions (:part, YYYYMMDDHH24) is past the
-- retention: its newest event's created_at, from the partition's index.
SELECT max(created_at) AS newest FROM proto.events_:part;
