"""Material for tests, benchmarks and demo episodes: real photographs and recordings from installed
packages, synthesised speech, assembled conversations, the telephone channel, and the figures (WER, DER).
No node imports it."""
