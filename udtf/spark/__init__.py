"""The Spark surfaces, each a thin adapter over the readers: the SQL table functions (:mod:`.sql_functions`),
the batch data source (:mod:`.batch_source`), the Structured Streaming source (:mod:`.stream_reader`), the rows
they output (:mod:`.output`), registration on a session (:mod:`.register`) and the typed frames of a read of
many tables (:mod:`.frames`)."""
