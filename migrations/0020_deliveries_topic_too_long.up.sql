-- A topic no Kafka topic can be (over 249 bytes: Kafka's limit is 249
-- characters, all ASCII) is not kept on its status row: the row's topic is
-- NULL, as for an event that could not be mapped to a topic, and the
-- event's own row keeps it (the console and the CLI show the event's
-- topic when the status row has none). A writer of outbox.events could
-- choose such a topic, and outbox.events does not index it, but the
-- indexes of outbox.deliveries (topic, key, ...) do: a topic of some
-- kilobytes that does not compress made every write of its status row fail
-- ("index row requires 32056 bytes, maximum size is 8191"), which the
-- relay took for PostgreSQL being unavailable and retried without end,
-- its slot held (issue 44, a hostile writer). Such an event fails as
-- INVALID_TOPIC, and nothing else can be delivered to its topic, so no
-- key order is lost. The WHEN clause is evaluated without calling the
-- function: a row with a short topic or none (every SENT row) costs only
-- it.
CREATE FUNCTION outbox.deliveries_drop_impossible_topic() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.topic := NULL;
    RETURN NEW;
END $$;

CREATE TRIGGER deliveries_impossible_topic
    BEFORE INSERT OR UPDATE OF topic ON outbox.deliveries
    FOR EACH ROW WHEN (octet_length(NEW.topic) > 249)
    EXECUTE FUNCTION outbox.deliveries_drop_impossible_topic();
