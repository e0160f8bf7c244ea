"""The snapshot reader: a chunk read between exact binlog watermarks (:mod:`.reader`), by the Arrow-native
SELECT where the column types allow (:mod:`.fast_select`), then corrected to the table at the high watermark
(:mod:`.correct`)."""
