"""Positions and progress: binlog offsets with a total order, chunk watermarks, durable records."""
