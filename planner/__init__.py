"""Before any row is read: connect, validate the server, discover tables and keys, split chunks."""
