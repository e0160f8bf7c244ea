"""Schema changes met in the binlog: what a DDL statement did to a captured table, and how its rows move to the
new columns (:mod:`.evolve`). What a statement's text says is read by :mod:`mysql_cdc.ddl`."""
