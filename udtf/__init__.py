"""What Spark executes, by role: the readers (:mod:`.binlog`, :mod:`.snapshot`, :mod:`.schema`, with value
conversion in :mod:`.convert`), the Spark adapters over them (:mod:`.spark`) and the sync job that mirrors a
database (:mod:`.sync`). Readers never import the adapters or the sync; see docs/DESIGN.md."""
