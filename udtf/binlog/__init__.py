"""The binlog reader: transactions framed from the events (:mod:`.transactions`), row images decoded by a plan
compiled per table map (:mod:`.rowimage`), the emit rule (:mod:`.emit`) applied to each change by the binlog
phase (:mod:`.phase`), where a read starts (:mod:`.startup`) and where a backlog is cut for parallel catch-up
(:mod:`.catchup`)."""
