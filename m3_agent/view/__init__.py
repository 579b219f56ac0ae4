"""A self-contained HTML view of a memory directory (people, clip timeline, answers with evidence)."""
