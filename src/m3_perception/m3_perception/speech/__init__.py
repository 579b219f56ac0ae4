"""Speech: voice activity (silero VAD), utterances, and speech to text (faster-whisper by default,
Whisper through transformers, an OpenAI-compatible endpoint, pocketsphinx), in a child process or not."""
