"""M3-Bench-format evaluation: annotations in, one JSONL line per question and a summary out."""
