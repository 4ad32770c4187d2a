-- A status row keeps no topic or key its indexes cannot hold. A writer of
-- outbox.events chooses both, and outbox.events indexes only the key (up
-- to about 2,680 bytes that do not compress), while the indexes of
-- outbox.deliveries hold the topic, the key and the order columns together
-- (at most 2,704 bytes a row). A longer one made every write of the event's
-- status row fail ("index row size 2920 exceeds btree version 4 maximum
-- 2704"), which the relay took for PostgreSQL being unavailable and
-- retried without end, its slot held (issue 44, a hostile writer).
--
-- - A topic over 249 bytes, which no Kafka topic can be (249 characters,
--   all ASCII): the row's topic is NULL, as for an event that could not be
--   mapped to a topic. The event fails as INVALID_TOPIC, and so does every
--   other event of that topic, so no key order is lost.
-- - A key over 2,048 bytes: the row's key is NULL, so the row neither
--   holds nor waits behind the other events of its key: a key that long
--   gets no key order when one of its events fails or is retried (Kafka
--   still puts its records on one partition, in the order they are sent).
--
-- The event's own row keeps both (the console and the CLI show the event's
-- when the status row has none). The WHEN clause is evaluated without
-- calling the function: a row with a short topic and key, or none (every
-- SENT row), costs only it (inserting 200,000 status rows took as long
-- with the trigger as without, within the noise of 1.2 to 1.4 s).
CREATE FUNCTION outbox.deliveries_drop_unindexable() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF octet_length(NEW.topic) > 249 THEN
        NEW.topic := NULL;
    END IF;
    IF octet_length(NEW.key) > 2048 THEN
        NEW.key := NULL;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER deliveries_unindexable
    BEFORE INSERT OR UPDATE OF topic, key ON outbox.deliveries
    FOR EACH ROW WHEN (octet_length(NEW.topic) > 249 OR octet_length(NEW.key) > 2048)
    EXECUTE FUNCTION outbox.deliveries_drop_unindexable();
