"""What Spark executes: snapshot reader, correction rule, value conversion, UDTF and data-source classes."""
