"""The sync job, the mirror users run: the streaming query and its batch function (:mod:`.job`), the Delta
tables it merges into, and the last-image rule each MERGE applies (:mod:`.last_image`)."""
