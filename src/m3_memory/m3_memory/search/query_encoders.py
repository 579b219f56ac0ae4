"""Image and audio queries for search_node: a face image or a voice sample becomes an embedding.

The encoders are m3_perception's (the same models that produced the stored face/voice embeddings),
imported lazily on the first image or audio query so a text-only memory never loads them. Both are
injectable (tests, other back-ends): any object with FaceEncoder.encode(rgb) -> detections with
.embedding, and VoiceEncoder.encode(float32 16 kHz) -> unit vector.

The voice encoder is the perception node's speaker back-end (`voice_backend`, empty: its default,
CAM++; `m3_perception.assembly.speaker_encoder`): a query embedded by another model than the stored
voices is meaningless. A query whose size differs from the stored voices' (resemblyzer 256-d,
CAM++ 192-d) is refused by the search with INVALID_AUDIO naming both sizes.
"""

from __future__ import annotations

import threading
from array import array

import numpy as np

from m3_memory import errors
from m3_memory.errors import MemoryApiError


class QueryEncoders:
    """Lazily created face / voice encoders shared by the service threads.

    max_image_pixels and max_audio_s bound what a query may make the codecs allocate; a larger
    query is refused (INVALID_IMAGE / INVALID_AUDIO) before its data is decoded.
    """

    def __init__(
        self,
        face_encoder=None,
        voice_encoder=None,
        max_image_pixels: int = 40_000_000,
        max_audio_s: float = 60.0,
        voice_backend: str = "",
        voice_model: str = "",
    ) -> None:
        self._face = face_encoder
        self._voice = voice_encoder
        self.voice_backend = voice_backend
        self.voice_model = voice_model
        self._lock = threading.Lock()
        self.max_image_pixels = max_image_pixels
        self.max_audio_s = max_audio_s

    def _face_encoder(self):
        with self._lock:
            if self._face is None:
                try:
                    from m3_perception.faces.face_encoder import FaceEncoder
                except ImportError as error:
                    raise MemoryApiError(
                        errors.INTERNAL_ERROR, f"image queries need m3_perception.faces.face_encoder: {error}"
                    ) from error
                self._face = FaceEncoder()
            return self._face

    def _voice_encoder(self):
        with self._lock:
            if self._voice is None:
                try:
                    from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND, speaker_encoder
                except ImportError as error:
                    raise MemoryApiError(
                        errors.INTERNAL_ERROR, f"audio queries need m3_perception's speaker encoders: {error}"
                    ) from error
                self._voice = speaker_encoder(self.voice_backend or DEFAULT_SPEAKER_BACKEND, self.voice_model)
            return self._voice

    def face_embedding_from_image(
        self, encoding: str, width: int, height: int, step: int, data: bytes | array, compressed_format: str = ""
    ) -> np.ndarray:
        """Embedding of the largest face in an image (sensor_msgs/Image fields), or INVALID_IMAGE."""
        try:
            from m3_runtime import image_codec
        except ImportError as error:
            raise MemoryApiError(
                errors.INTERNAL_ERROR, f"image queries need m3_runtime.image_codec: {error}"
            ) from error
        try:
            if compressed_format:
                rgb = image_codec.decode_compressed(compressed_format, data, self.max_image_pixels)
            else:
                rgb = image_codec.decode_raw(encoding, width, height, step, data, self.max_image_pixels)
        except ValueError as error:
            raise MemoryApiError(errors.INVALID_IMAGE, f"image unusable: {error}") from error
        encoder = self._face_encoder()
        with self._lock:  # the detector and dlib are not documented as thread-safe
            detections = [d for d in encoder.encode(rgb) if len(getattr(d, "embedding", []))]
        if not detections:
            raise MemoryApiError(errors.INVALID_IMAGE, "no face with an identity embedding found in the image")
        largest = max(detections, key=lambda d: float(d.w) * float(d.h) if hasattr(d, "w") else 0.0)
        return np.asarray(largest.embedding, dtype=np.float32)

    def voice_embedding_from_audio(
        self, sample_rate: int, channels: int, sample_format: str, data: bytes | array, coding_format: str = "wave"
    ) -> np.ndarray:
        """Speaker embedding of an AudioChunk's samples, or INVALID_AUDIO."""
        try:
            from m3_runtime import audio_codec
        except ImportError as error:
            raise MemoryApiError(
                errors.INTERNAL_ERROR, f"audio queries need m3_runtime.audio_codec: {error}"
            ) from error
        try:
            limits = audio_codec.AudioLimits(max_chunk_s=self.max_audio_s)
            samples = audio_codec.decode_chunk(sample_rate, channels, sample_format, data, coding_format, limits)
        except ValueError as error:
            raise MemoryApiError(errors.INVALID_AUDIO, f"audio unusable: {error}") from error
        encoder = self._voice_encoder()
        try:
            with self._lock:
                return np.asarray(encoder.encode(samples), dtype=np.float32)
        except ValueError as error:
            raise MemoryApiError(errors.INVALID_AUDIO, f"audio unusable: {error}") from error
