"""Microphone input from the audio_common driver (ros-drivers/audio_common, ROS 2): the stream's format
arrives on AudioInfo (latched, repeated every 5 s), the bytes on AudioDataStamped.

Plain module (no rclpy): pairs each data message with the last AudioInfo and decodes it through
audio_codec.decode_chunk, with the same limits as AudioChunk input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from m3_runtime.audio_codec import AudioDecodeError, AudioLimits, check_format, decode_chunk


@dataclass(frozen=True)
class StreamFormat:
    """audio_common_msgs/AudioInfo's fields that decoding needs (bitrate is not: PCM only)."""

    sample_rate: int
    channels: int
    sample_format: str
    coding_format: str

    def describe(self) -> str:
        return f"{self.coding_format} {self.sample_format} {self.channels} ch {self.sample_rate} Hz"


class AudioCommonStream:
    """The last AudioInfo of one driver and the decoding of its data messages."""

    def __init__(self, info_topic: str, limits: AudioLimits) -> None:
        self.info_topic = info_topic
        self.limits = limits
        self.format: StreamFormat | None = None
        self.problem = ""  # why the current format cannot be decoded; "" when it can

    def set_info(self, fmt: StreamFormat) -> bool:
        """Take a new AudioInfo; True when its format differs from the last one (the caller logs it)."""
        changed = fmt != self.format
        self.format = fmt
        try:
            check_format(fmt.sample_rate, fmt.channels, fmt.sample_format, fmt.coding_format, self.limits)
            self.problem = ""
        except AudioDecodeError as error:
            self.problem = f"the audio_common stream on {self.info_topic} ({fmt.describe()}) cannot be used: {error}"
        return changed

    def decode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Mono float32 16 kHz samples of one AudioDataStamped's bytes, else AudioDecodeError saying why."""
        fmt = self.format
        if fmt is None:
            raise AudioDecodeError(
                f"no AudioInfo received yet on {self.info_topic}: audio_common data is dropped until the "
                "driver's format is known (audio_common_info_topic)"
            )
        if self.problem:
            raise AudioDecodeError(self.problem)
        return decode_chunk(fmt.sample_rate, fmt.channels, fmt.sample_format, data, fmt.coding_format, self.limits)
