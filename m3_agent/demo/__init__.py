"""The demo episode: a scripted multi-person conversation rendered offline, with its questions."""
