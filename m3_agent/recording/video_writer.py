"""Write an mp4 (H.264 or MPEG-4 video + AAC audio) from RGB frames and mono audio, streaming."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

AUDIO_FRAME_SAMPLES = 1024


def _video_codec() -> str:
    """libx264 where this FFmpeg build has it, else the always-present MPEG-4 part 2 encoder."""
    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


def write_video(
    path: str | Path,
    frames: Iterable[np.ndarray],
    fps: int,
    audio: np.ndarray | None = None,
    audio_rate_hz: int = 16000,
) -> Path:
    """frames: HxWx3 uint8 RGB, all the same size; audio: float32 mono in [-1, 1]."""
    path = Path(path)
    with av.open(str(path), "w") as container:
        video = container.add_stream(_video_codec(), rate=fps)
        video.pix_fmt = "yuv420p"
        sound = None
        if audio is not None:
            sound = container.add_stream("aac", rate=audio_rate_hz)
            sound.layout = "mono"
        for index, rgb in enumerate(frames):
            if index == 0:
                video.height, video.width = rgb.shape[:2]
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if sound is not None:
            samples = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
            for start in range(0, len(samples), AUDIO_FRAME_SAMPLES):
                block = samples[start : start + AUDIO_FRAME_SAMPLES]
                frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="fltp", layout="mono")
                frame.sample_rate = audio_rate_hz
                frame.pts = start
                frame.time_base = Fraction(1, audio_rate_hz)
                container.mux(sound.encode(frame))
            container.mux(sound.encode(None))
    return path
