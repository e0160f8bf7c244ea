"""What a capture records: chunk watermarks, plans, schemas and their history, rounds, committed offsets, in a
state directory (:mod:`.store`, whose docstring is the layout)."""
