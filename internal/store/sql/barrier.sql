-- A synchronous commit (txid_current() makes the transaction write a commit
-- record): when it returns, every transaction committed before it is on
-- disk, whatever its synchronous_commit.
SELECT txid_current()
