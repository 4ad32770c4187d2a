-- PENDING rows, how long the most overdue one has been due (seconds, 0 when
-- none is due), and FAILED rows; each answered from its partial index.
SELECT (SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'),
       coalesce((SELECT greatest(extract(epoch FROM now() - min(next_attempt_at)), 0)
                 FROM outbox.deliveries WHERE status = 'PENDING'), 0)::float8,
       (SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED')
