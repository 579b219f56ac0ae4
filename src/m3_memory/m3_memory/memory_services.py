"""The memory node's services (search_node, search_clip, get_entity, get_names, get_stats, locate_entity): each request
into the search API and its answer or error code back (a mixin of MemoryNode, which owns memory, encoders
and the logger)."""

from __future__ import annotations

import traceback

from m3_interfaces.msg import Entity
from m3_interfaces.srv import GetEntity, GetNames, GetStats, LocateEntity, SearchClip, SearchNode
from m3_memory import errors
from m3_memory.errors import MemoryApiError, StoreError
from m3_memory.memory import Memory
from m3_memory.memory_msgs import clip_msg, item_msg, request_stamp_ns, request_where, sighting_msg, to_time


class MemoryServicesMixin:
    """Service callbacks; see the module docstring. Every failure becomes an error code, never a crash."""

    def _fail(self, response, error: Exception):
        if isinstance(error, MemoryApiError):
            response.error_code, response.error_message = error.code, error.message
        elif isinstance(error, StoreError):
            response.error_code, response.error_message = errors.STORE_UNAVAILABLE, str(error)
        else:
            response.error_code, response.error_message = errors.INTERNAL_ERROR, f"{type(error).__name__}: {error}"
            self.get_logger().error(f"service failure: {traceback.format_exc()}")
        return response

    def _require_memory(self) -> Memory:
        if self.memory is None:
            raise MemoryApiError(errors.STORE_UNAVAILABLE, self.store_error or "memory store not open")
        return self.memory

    def _search_node(self, request: SearchNode.Request, response: SearchNode.Response) -> SearchNode.Response:
        try:
            memory = self._require_memory()
            face = voice = None
            if request.image.height > 0 or len(request.image.data) > 0:
                image = request.image
                face = self.encoders.face_embedding_from_image(
                    image.encoding, image.width, image.height, image.step, image.data
                )
            if len(request.audio.data) > 0:
                audio = request.audio
                voice = self.encoders.voice_embedding_from_audio(
                    audio.sample_rate, audio.channels, audio.sample_format, audio.data, audio.coding_format
                )
            hits = memory.search.search_node(
                request.query,
                list(request.kinds),
                int(request.top_k),
                int(request.before_clip),
                request_stamp_ns(request.before_stamp),
                face_embedding=face,
                voice_embedding=voice,
                robot_id=request.robot_id,
                where=request_where(memory.search, request),
            )
            response.items = [item_msg(hit) for hit in hits]
            response.error_code = SearchNode.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            return self._fail(response, error)
        return response

    def _search_clip(self, request: SearchClip.Request, response: SearchClip.Response) -> SearchClip.Response:
        try:
            memory = self._require_memory()
            records = memory.search.search_clip(
                request.query,
                int(request.top_k),
                float(request.threshold),
                int(request.before_clip),
                request.conversation_id,
                request_stamp_ns(request.before_stamp),
                robot_id=request.robot_id,
                where=request_where(memory.search, request),
            )
            response.clips = [clip_msg(record) for record in records]
            response.error_code = SearchClip.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            return self._fail(response, error)
        return response

    def _get_entity(self, request: GetEntity.Request, response: GetEntity.Response) -> GetEntity.Response:
        try:
            view = self._require_memory().search.get_entity(request.entity_id)
            response.entity = Entity(
                entity_id=view.entity_id,
                kind=view.kind,
                name=view.name,
                aliases=view.aliases,
                member_ids=view.member_ids,
                observation_count=int(view.observation_count),
                first_clip=int(view.first_clip),
                last_clip=int(view.last_clip),
                first_seen=to_time(view.first_ns),
                last_seen=to_time(view.last_ns),
                memory_ids=view.memory_ids,
                crop_jpeg=view.crop_jpeg,
                label=view.label,
            )
            response.error_code = GetEntity.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            return self._fail(response, error)
        return response

    def _locate_entity(self, request: LocateEntity.Request, response: LocateEntity.Response) -> LocateEntity.Response:
        try:
            located = self._require_memory().search.locate_entity(
                request.entity_id,
                request.name,
                request_stamp_ns(request.before_stamp),
                int(request.max_sightings),
                request.label,
            )
            response.entity_id, response.name = located.entity_id, located.name
            response.sightings = [sighting_msg(s) for s in located.sightings]
            response.error_code = LocateEntity.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            return self._fail(response, error)
        return response

    def _get_names(self, request: GetNames.Request, response: GetNames.Response) -> GetNames.Response:
        try:
            names = self._require_memory().search.get_names(list(request.entity_ids), bool(request.people))
            response.entity_ids, response.names = list(names), list(names.values())
            response.error_code = GetNames.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            return self._fail(response, error)
        return response

    def _get_stats(self, request: GetStats.Request, response: GetStats.Response) -> GetStats.Response:
        try:
            stats = self._require_memory().search.get_stats()
            for name in (
                "clips", "last_clip_index", "episodic", "semantic", "faces", "voices", "persons", "objects", "texts",
                "index_size", "disk_bytes", "schema_version", "memory_dir",
            ):  # fmt: skip
                setattr(response, name, getattr(stats, name))
            response.error_code = GetStats.Response.OK
        except Exception as error:  # noqa: BLE001 - every failure becomes an error code
            response.memory_dir = self.memory_dir
            return self._fail(response, error)
        return response
