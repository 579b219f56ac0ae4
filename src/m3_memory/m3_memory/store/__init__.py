"""The embedded SQLite store and what works on a memory directory: the integrity check, repair, copy,
import and export, the reference import, the saved text index and the ANN index."""
