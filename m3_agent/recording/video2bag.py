"""Convert a video file (e.g. an M3-Bench-robot mp4) into a rosbag2 recording, streaming.

The video is decoded packet by packet with PyAV, so memory stays bounded for a 30-minute 1080p
episode: frames are sampled at `fps`, JPEG-encoded into sensor_msgs/CompressedImage, and the
audio track is resampled to 16 kHz mono S16LE m3_interfaces/AudioChunk messages. Header stamps
are stream time: `start_time_s` plus the media timestamp. A pose track (`poses`) is written beside them as
geometry_msgs/PoseWithCovarianceStamped, in time order with the frames and audio.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from m3_agent.recording.pose_track import TrackPose
from m3_agent.recording.typestore import AUDIO_CHUNK, COMPRESSED_IMAGE, m3_typestore

POSE = "geometry_msgs/msg/PoseWithCovarianceStamped"

AUDIO_RATE_HZ = 16000
STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


@dataclass(frozen=True)
class ConversionOptions:
    fps: float = 5.0
    storage: str = "mcap"
    image_topic: str = "/camera/image_raw/compressed"
    audio_topic: str = "/audio"
    camera_frame: str = "head_camera"
    microphone_frame: str = "head_microphone"
    jpeg_quality: int = 85
    max_height: int = 720  # downscale taller frames to bound the bag size; 0 keeps the original
    audio_chunk_s: float = 0.1
    start_time_s: float = 0.0
    poses: tuple[TrackPose, ...] = ()  # the robot's pose track (m3_agent.recording.pose_track); () = none
    pose_topic: str = "/amcl_pose"  # written as geometry_msgs/PoseWithCovarianceStamped, as AMCL publishes

    def validate(self) -> None:
        if not 0.1 <= self.fps <= 60:
            raise ValueError(f"fps must be within 0.1..60, got {self.fps}")
        if self.storage not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {self.storage!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be within 1..100, got {self.jpeg_quality}")
        if self.max_height < 0:
            raise ValueError(f"max_height must be >= 0, got {self.max_height}")
        if not 0.01 <= self.audio_chunk_s <= 5:
            raise ValueError(f"audio_chunk_s must be within 0.01..5, got {self.audio_chunk_s}")
        if self.start_time_s < 0:
            raise ValueError(f"start_time_s must be >= 0, got {self.start_time_s}")


@dataclass
class ConversionReport:
    duration_s: float = 0.0
    frames: int = 0
    audio_chunks: int = 0
    audio_samples: int = 0
    poses: int = 0


def _stamp(typestore, seconds: float):
    time_type = typestore.types["builtin_interfaces/msg/Time"]
    nanoseconds = round(seconds * 1e9)
    return time_type(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def _header(typestore, seconds: float, frame_id: str):
    return typestore.types["std_msgs/msg/Header"](stamp=_stamp(typestore, seconds), frame_id=frame_id)


def _encode_jpeg(frame: av.VideoFrame, options: ConversionOptions) -> np.ndarray:
    bgr = frame.to_ndarray(format="bgr24")
    if options.max_height and bgr.shape[0] > options.max_height:
        width = round(bgr.shape[1] * options.max_height / bgr.shape[0])
        bgr = cv2.resize(bgr, (width, options.max_height), interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, options.jpeg_quality])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return encoded.reshape(-1)


def _pose_message(typestore, pose: TrackPose, stamp_s: float):
    types = typestore.types
    inner = types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](x=pose.x, y=pose.y, z=0.0),
        orientation=types["geometry_msgs/msg/Quaternion"](
            x=0.0, y=0.0, z=math.sin(pose.yaw / 2), w=math.cos(pose.yaw / 2)
        ),
    )
    covariance = np.zeros(36, dtype=np.float64)
    with_covariance = types["geometry_msgs/msg/PoseWithCovariance"](pose=inner, covariance=covariance)
    return types[POSE](header=_header(typestore, stamp_s, pose.frame_id), pose=with_covariance)


def convert(
    video: str | Path,
    out: str | Path,
    options: ConversionOptions | None = None,
    progress: Callable[[float], None] | None = None,
) -> ConversionReport:
    """Write `out` (a new rosbag2 directory) from `video`; `progress` gets media seconds done."""
    options = options or ConversionOptions()
    options.validate()
    video, out = Path(video), Path(out)
    if not video.is_file():
        raise FileNotFoundError(f"video not found: {video}")
    if out.exists():
        raise FileExistsError(f"output already exists (rosbag2 writes a new directory): {out}")
    typestore = m3_typestore()
    image_type = typestore.types[COMPRESSED_IMAGE]
    audio_type = typestore.types[AUDIO_CHUNK]
    report = ConversionReport()
    chunk_samples = round(options.audio_chunk_s * AUDIO_RATE_HZ)
    try:
        container = av.open(str(video))
    except av.error.FFmpegError as error:
        raise ValueError(f"cannot decode {video}: {error}") from error
    with container, Writer(out, version=9, storage_plugin=STORAGES[options.storage]) as writer:
        streams = [*container.streams.video[:1], *container.streams.audio[:1]]
        if not streams:
            raise ValueError(f"{video} has neither a video nor an audio stream")
        image_conn = writer.add_connection(options.image_topic, COMPRESSED_IMAGE, typestore=typestore)
        audio_conn = writer.add_connection(options.audio_topic, AUDIO_CHUNK, typestore=typestore)
        pose_conn = writer.add_connection(options.pose_topic, POSE, typestore=typestore) if options.poses else None
        poses = list(options.poses)

        def write_poses(until_s: float) -> None:
            """The track's poses up to media time until_s, so the bag stays in time order."""
            while poses and poses[0].t_s <= until_s:
                pose = poses.pop(0)
                stamp_s = options.start_time_s + pose.t_s
                message = typestore.serialize_cdr(_pose_message(typestore, pose, stamp_s), POSE)
                writer.write(pose_conn, round(stamp_s * 1e9), message)
                report.poses += 1

        for stream in streams:
            stream.thread_type = "AUTO"
        resampler = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_RATE_HZ)
        pending = np.zeros(0, dtype=np.int16)
        audio_start: float | None = None
        next_frame_s = 0.0

        def write_audio(samples: np.ndarray) -> None:
            start_s = options.start_time_s + audio_start + report.audio_samples / AUDIO_RATE_HZ
            message = audio_type(
                header=_header(typestore, start_s, options.microphone_frame),
                sample_rate=AUDIO_RATE_HZ,
                channels=1,
                sample_format="S16LE",
                coding_format="wave",
                data=samples.astype("<i2").view(np.uint8),
            )
            writer.write(audio_conn, round(start_s * 1e9), typestore.serialize_cdr(message, AUDIO_CHUNK))
            report.audio_chunks += 1
            report.audio_samples += len(samples)

        def take_audio(frames: list[av.AudioFrame]) -> None:
            nonlocal pending, audio_start
            for resampled in frames:
                if audio_start is None:
                    audio_start = max(0.0, float(resampled.time or 0.0))
                pending = np.concatenate([pending, resampled.to_ndarray().reshape(-1)])
            while len(pending) >= chunk_samples:
                write_audio(pending[:chunk_samples])
                pending = pending[chunk_samples:]

        for packet in container.demux(*streams):
            for frame in packet.decode():
                if frame.time is None:
                    continue
                media_s = float(frame.time)
                write_poses(media_s)
                if isinstance(frame, av.AudioFrame):
                    take_audio(resampler.resample(frame))
                elif media_s + 1e-6 >= next_frame_s:
                    stamp_s = options.start_time_s + media_s
                    message = image_type(
                        header=_header(typestore, stamp_s, options.camera_frame),
                        format="jpeg",
                        data=_encode_jpeg(frame, options),
                    )
                    writer.write(image_conn, round(stamp_s * 1e9), typestore.serialize_cdr(message, COMPRESSED_IMAGE))
                    report.frames += 1
                    next_frame_s = (math.floor(media_s * options.fps + 1e-6) + 1) / options.fps
                report.duration_s = max(report.duration_s, media_s)
                if progress is not None:
                    progress(report.duration_s)
        take_audio(resampler.resample(None))
        if len(pending):
            write_audio(pending)
        write_poses(math.inf)
    return report


def media_duration_s(video: str | Path) -> float:
    """Container duration in seconds (0 when unknown), for progress bars."""
    if not Path(video).is_file():
        raise FileNotFoundError(f"video not found: {video}")
    try:
        with av.open(str(video)) as container:
            return float(container.duration or 0) / av.time_base
    except av.error.FFmpegError as error:
        raise ValueError(f"cannot decode {video}: {error}") from error
