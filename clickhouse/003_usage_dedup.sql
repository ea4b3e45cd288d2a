-- A trace batch replayed after it had already landed (a crash between insert and spool delete, a
-- timeout whose insert went through) is a no-op in traces, thanks to its deduplication token; but the
-- materialized view is fed by the insert, so without a deduplication window of its own usage_minute
-- counted the batch a second time. With one, the view's block carries the same token and is dropped too.
-- Every insert into traces carries a token, so identical aggregates of different batches never collide.
ALTER TABLE usage_minute MODIFY SETTING non_replicated_deduplication_window = 10000;
