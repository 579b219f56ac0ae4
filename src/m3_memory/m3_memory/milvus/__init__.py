"""The Milvus back-end: its client and writer, the collections' schema, the rows read back into a snapshot,
the spool of writes that could not reach the server, the fleet reader, the milvus-lite server as a child
process and the to-/from-milvus tools."""
