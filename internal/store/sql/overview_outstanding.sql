-- The console overview's exact counts of the events still to deliver or to
-- look at, per table, topic and status: PENDING, PROCESSING and FAILED
-- rows, at most $1 of each status (each read from its partial index), so
-- that a backlog of millions costs no more than $1 rows. Such rows carry
-- their topic; the event's is read only for one without.
SELECT coalesce(d.source, 'outbox.events'),
       coalesce(d.topic, (SELECT r.topic FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1)),
       d.status, count(*)
FROM ((SELECT event_id, status, source, topic FROM outbox.deliveries WHERE status = 'PENDING' LIMIT $1)
      UNION ALL
      (SELECT event_id, status, source, topic FROM outbox.deliveries WHERE status = 'PROCESSING' LIMIT $1)
      UNION ALL
      (SELECT event_id, status, source, topic FROM outbox.deliveries WHERE status = 'FAILED' LIMIT $1)) d
GROUP BY 1, 2, 3
