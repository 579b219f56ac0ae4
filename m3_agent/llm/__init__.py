"""The language model behind the memorizer and the reasoner: packaged GGUF files (models), the
llama.cpp server that serves one (server), and the profile that chooses embedded, endpoint or
none for `m3 run/replay/demo/eval` (profile, service). Importing this package loads nothing heavy."""
